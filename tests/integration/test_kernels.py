"""Kernels analysis: per-name statistics, launch latency clamp, kernels shorter than their
launch, CUDA graph launches, families on the samples.

The small fixtures are hand-made Kineto-like traces (written by hand, not recorded).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from tests.conftest import sample_names
from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections import kernels
from traceinsight.render.sections.kernels import render_terminal
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"


def _launch_args(grid: list[int], block: list[int], occupancy: float = 50.0) -> dict[str, Any]:
    return {
        "grid": grid,
        "block": block,
        "registers per thread": 32,
        "shared memory": 1024,
        "est. achieved occupancy %": occupancy,
    }


def _events() -> list[dict[str, Any]]:
    """Times in µs. Each kernel is launched by a 5 µs cudaLaunchKernel call."""
    return [
        op("aten::mm", 0, 100),
        launch("cudaLaunchKernel", 10, 5, 1),  # ends at 15
        kernel(GEMM, 20, 50, 1, extra=_launch_args([8, 8, 1], [128, 1, 1], 25.0)),  # latency 5 µs
        launch("cudaLaunchKernel", 30, 5, 2),  # ends at 35
        kernel(GEMM, 80, 30, 2, extra=_launch_args([8, 8, 1], [128, 1, 1], 0.0)),  # latency 45 µs
        launch("cudaLaunchKernel", 40, 5, 3),
        kernel(GEMM, 120, 10, 3, extra=_launch_args([4, 1, 1], [128, 1, 1], 75.0)),  # latency 75 µs
        op("aten::add", 200, 50),
        launch("cudaLaunchKernel", 210, 5, 4),  # ends at 215
        # Starts 0.5 µs before its launch call returns (clock skew): clamped to 0, counted.
        kernel(ADD, 214.5, 1, 4, extra=_launch_args([1, 1, 1], [64, 1, 1], 10.0)),
        launch("cudaLaunchKernel", 220, 5, 5),
        kernel(ADD, 230, 2, 5, extra=_launch_args([1, 1, 1], [64, 1, 1], 10.0)),
    ]


@pytest.fixture
def trace(tmp_path: Path) -> Trace:
    return load(write_trace(tmp_path / "k.json", _events(), baseTimeNanoseconds=10**18), cache=False)


def test_per_kernel_table(trace: Trace) -> None:
    r = kernels.run(trace, AnalysisConfig())
    assert r.total_ns == (50 + 30 + 10 + 1 + 2) * 1000
    gemm = r.kernels.filter(pl.col("name") == GEMM).row(0, named=True)
    assert gemm["calls"] == 3
    assert (gemm["total_ns"], gemm["min_ns"], gemm["max_ns"]) == (90_000, 10_000, 50_000)
    assert gemm["mean_ns"] == pytest.approx(30_000)
    assert gemm["share_pct"] == pytest.approx(100 * 90 / 93)
    assert gemm["grid"] == "8×8×1"  # the most common of the three
    assert gemm["block"] == "128×1×1"
    # an occupancy of 0 means "not estimated": the mean is over 25 and 75 only
    assert gemm["occupancy_pct"] == pytest.approx(50.0)
    assert (gemm["family"], gemm["tensor_core"]) == ("gemm", True)
    assert r.kernels["name"].to_list() == [GEMM, ADD]  # sorted by total time
    assert r.tensor_core_ns == 90_000


def test_launch_latency_clamps_negative_and_counts_them(trace: Trace) -> None:
    s = kernels.run(trace, AnalysisConfig()).launch
    assert s.linked == s.kernels == 5 and s.unlinked == 0
    assert s.negative_latency_clamped == 1
    # latencies in µs: 5, 45, 75, 0 (clamped from -0.5), 5
    assert s.latency_max_ns == 75_000
    assert s.latency_mean_ns == pytest.approx((5 + 45 + 75 + 0 + 5) * 1000 / 5)
    assert s.latency_p50_ns == pytest.approx(5_000)


def test_kernels_shorter_than_their_launch(trace: Trace) -> None:
    r = kernels.run(trace, AnalysisConfig())
    s = r.launch
    assert s.launch_cpu_mean_ns == pytest.approx(5_000)
    assert s.shorter_than_launch == 2  # the 1 µs and 2 µs adds
    assert s.shorter_than_launch_pct == pytest.approx(40.0)
    fam = {row["family"]: row for row in r.families.iter_rows(named=True)}
    assert fam["elementwise"]["short_pct"] == pytest.approx(100.0)
    assert fam["gemm"]["short_pct"] == pytest.approx(0.0)
    assert fam["gemm"]["tensor_core_ns"] == 90_000


def test_cuda_graph_kernels_share_their_launch_and_skip_latency(tmp_path: Path) -> None:
    events = [
        launch("cudaGraphLaunch", 0, 30, 9),
        kernel("triton_poi_fused_add_0", 40, 5, 9),
        kernel("triton_red_fused_sum_1", 46, 20, 9),
        kernel("triton_poi_fused_mul_2", 70, 8, 9),
        launch("cudaLaunchKernel", 100, 4, 10),
        kernel(ADD, 110, 3, 10),
    ]
    r = kernels.run(load(write_trace(tmp_path / "g.json", events), cache=False), AnalysisConfig())
    s = r.launch
    assert (s.graph_launches, s.graph_kernels, s.graph_kernel_ns) == (1, 3, 33_000)
    assert s.latency_measured == 1 and s.latency_max_ns == 6_000
    # 30 µs of cudaGraphLaunch spread over 3 kernels: 10 µs each, so the 5 and 8 µs ones
    # are shorter than their launch, the 20 µs one is not; the 3 µs add (4 µs launch) is too.
    assert s.shorter_than_launch == 3
    graph_calls = dict(zip(r.kernels["name"], r.kernels["graph_calls"], strict=True))
    assert graph_calls["triton_red_fused_sum_1"] == 1 and graph_calls[ADD] == 0
    subs = dict(zip(r.subfamilies["subfamily"], r.subfamilies["kernels"], strict=True))
    assert subs == {"pointwise": 2, "reduction": 1}


def test_unlinked_kernels_are_counted_not_dropped(tmp_path: Path) -> None:
    events = [kernel(ADD, 10, 3, 77), launch("cudaLaunchKernel", 0, 2, 1), kernel(ADD, 5, 3, 1)]
    r = kernels.run(load(write_trace(tmp_path / "u.json", events), cache=False), AnalysisConfig())
    assert (r.launch.kernels, r.launch.linked, r.launch.unlinked) == (2, 1, 1)
    assert r.kernels["calls"].to_list() == [2]


def test_cpu_only_trace_is_unavailable(tmp_path: Path) -> None:
    r = kernels.run(load(write_trace(tmp_path / "cpu.json", [op("aten::add", 0, 5)]), cache=False), AnalysisConfig())
    assert not r.available and "no GPU kernels" in (r.reason or "")
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("name", sample_names())
def test_runs_on_every_sample(name: str, sample_trace: Any) -> None:
    r = kernels.run(sample_trace(name), AnalysisConfig())
    assert r.available
    assert r.kernels["calls"].sum() == r.launch.kernels
    assert r.families["total_ns"].sum() == r.total_ns
    assert r.families["share_pct"].sum() == pytest.approx(100.0)
    json.dumps(r.to_dict(), allow_nan=False)
    out = io.StringIO()
    Console(file=out, width=120).print(render_terminal(r))
    assert "by family" in out.getvalue()


def test_gemm_bf16_top_kernel_is_a_tensor_core_gemm(sample_trace: Any) -> None:
    r = kernels.run(sample_trace("gemm_bf16"), AnalysisConfig())
    top = r.kernels.row(0, named=True)
    assert top["family"] == "gemm" and top["tensor_core"], top["name"]
    assert top["share_pct"] > 90
    assert r.tensor_core_pct is not None and r.tensor_core_pct > 90


def test_train_compiled_has_triton_kernels(sample_trace: Any) -> None:
    r = kernels.run(sample_trace("train_compiled"), AnalysisConfig())
    # Inductor's Triton kernels are classed by what they compute, their library says Triton
    inductor = r.kernels.filter(pl.col("library") == "inductor")
    assert set(inductor["family"].to_list()) >= {"elementwise", "reduction"}
    assert set(r.subfamilies["subfamily"].to_list()) >= {"pointwise", "reduction"}


def test_train_cudagraphs_kernels_come_from_graph_launches(sample_trace: Any) -> None:
    s = kernels.run(sample_trace("train_cudagraphs"), AnalysisConfig()).launch
    assert s.graph_launches > 0 and s.graph_kernels > s.kernels / 2


def test_tiny_kernels_are_mostly_shorter_than_their_launch(sample_trace: Any) -> None:
    s = kernels.run(sample_trace("tiny_kernels"), AnalysisConfig()).launch
    assert s.shorter_than_launch_pct is not None and s.shorter_than_launch_pct > 50
    # ... unlike a compute-bound GEMM run
    big = kernels.run(sample_trace("gemm_bf16"), AnalysisConfig())
    gemm = big.families.filter(pl.col("family") == "gemm").row(0, named=True)
    assert gemm["short_pct"] < 10


# ---- graph replays ---------------------------------------------------------------------

ROOT_DIR = Path(__file__).resolve().parents[2]
VLLM_FULL = ROOT_DIR.parent / "shared" / "third_party" / "tracelens" / "vllm_decode_full" / "graph_execution.json.gz"


def _graph_events(launch_name: str) -> list[dict[str, Any]]:
    """Hand-made: three replays of graph A (two kernels) and one of graph B (three kernels);
    each launch's kernels share its correlation id, as Kineto writes them."""
    events: list[dict[str, Any]] = []
    t = 100.0
    for i, names in enumerate([["a1", "a2"], ["a1", "a2"], ["b1", "b2", "b3"], ["a1", "a2"]]):
        corr = 100 + i
        events.append(launch(launch_name, t, 5, corr))
        k_ts = t + 10
        for n in names:
            events.append(kernel(n, k_ts, 20 if n.startswith("a") else 40, corr))
            k_ts += 25 if n.startswith("a") else 45
        t += 200
    return events


@pytest.mark.parametrize("launch_name", ["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch_v2"])
def test_graph_replays_are_told_apart_by_their_kernels(tmp_path: Path, launch_name: str) -> None:
    trace = load(write_trace(tmp_path / "graphs.json", _graph_events(launch_name)), cache=False)
    r = kernels.run(trace, AnalysisConfig())
    assert r.launch.graph_launches == 4 and r.launch.graph_kernels == 9
    rows = {row["launches"]: row for row in r.graphs.iter_rows(named=True)}
    a, b = rows[3], rows[1]
    assert (a["graph"], a["kernels_per_launch"], a["total_ns"]) == (0, 2, 120_000)
    assert (b["graph"], b["kernels_per_launch"], b["total_ns"]) == (1, 3, 120_000)
    assert a["share_pct"] == pytest.approx(50.0) and a["top_kernel_pct"] == pytest.approx(50.0)
    assert b["top_kernel"] in ("b1", "b2", "b3") and b["per_launch_ns"] == pytest.approx(120_000)
    assert "graphs replayed" in _render(r)


def test_a_decode_loop_replays_one_graph() -> None:
    r = kernels.run(load(ROOT_DIR / "sample_traces" / "decode" / "decode_graph.json.gz"), AnalysisConfig())
    (g,) = r.graphs.iter_rows(named=True)
    # 80 forwards, one graph replay each, 133 kernels per replay: 97 % of all kernel time
    assert (g["launches"], g["kernels_per_launch"]) == (80, 133)
    assert 95.0 < g["share_pct"] < 99.0


@pytest.mark.skipif(not VLLM_FULL.exists(), reason="third-party traces not present")
def test_hip_graph_replays_are_graph_kernels() -> None:
    r = kernels.run(load(VLLM_FULL), AnalysisConfig())
    assert r.launch.graph_launches == 1 and r.launch.graph_kernels == 421
    assert r.graphs.height == 1 and r.graphs["share_pct"][0] > 95.0


def _render(r: kernels.KernelsResult) -> str:
    out = io.StringIO()
    Console(file=out, width=120).print(render_terminal(r))
    return out.getvalue()
