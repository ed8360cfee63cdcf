"""Bound classification on the recorded sample traces (H200) and on hand-made edge cases."""

from __future__ import annotations

import dataclasses
import io
import json
import math
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from tests.conftest import sample_path
from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig, Inputs
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections import bound
from traceinsight.cli.app import main
from traceinsight.render.sections.bound import render_by, render_terminal
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

REGIME_LABELS = {
    "tiny_matmuls": "overhead",
    "big_gemm_bf16": "compute",
    "elementwise_gb": "memory",
    "host_sleep": "host",
    "item_sync": "sync",
}


@pytest.fixture(scope="module")
def regimes() -> bound.BoundResult:
    return run_one(load(sample_path("regimes"), cache=False), "bound", AnalysisConfig())


def _annotations(result: bound.BoundResult) -> pl.DataFrame:
    return result.regions.filter(pl.col("kind") == "annotation")


@pytest.mark.parametrize(("region", "label"), sorted(REGIME_LABELS.items()))
def test_regimes_labels(regimes: bound.BoundResult, region: str, label: str) -> None:
    rows = _annotations(regimes).filter(pl.col("name") == region)
    assert rows.height == 2  # one per recorded step
    assert rows["label"].to_list() == [label, label]
    assert set(rows["confidence"].to_list()) <= {"high", "medium"}
    for reason in rows["reason"].to_list():
        assert reason


def test_regimes_evidence_numbers(regimes: bound.BoundResult) -> None:
    rows = {r["name"]: r for r in _annotations(regimes).iter_rows(named=True)}
    gemm, elem, tiny = rows["big_gemm_bf16"], rows["elementwise_gb"], rows["tiny_matmuls"]
    # 8192³ bf16 GEMMs on an H200 (989 TFLOP/s dense): far above the ridge, well over half of peak.
    assert gemm["busy_pct"] > 95
    assert 400 < gemm["tflops"] < 989.5
    assert gemm["intensity"] > gemm["ridge"]
    # 1 GiB fp32 add/mul/relu: below the ridge, near the 4.8 TB/s bandwidth.
    assert elem["intensity"] < elem["ridge"]
    assert 2.5 < elem["tbps"] <= 4.8
    assert elem["pct_of_roofline"] > 60
    # 32x32 matmuls leave the GPU mostly idle, waiting for launches.
    assert tiny["busy_pct"] < 50
    assert tiny["idle_cause"] == "launch_overhead"
    assert rows["item_sync"]["idle_cause"] == "sync"
    assert rows["host_sleep"]["busy_pct"] == 0


def test_gpm_counters_agree_with_achieved_rates(regimes: bound.BoundResult) -> None:
    """Cross-check against measured GPM counters inside the regions.

    DRAM bandwidth utilisation is a share of peak bandwidth, like our achieved TB/s over the
    datasheet figure: the two should match closely. Tensor-core utilisation is the share of
    time the tensor pipes are busy, which bounds the share of peak FLOP/s from above (clocks
    under the power cap run below the boost clock the datasheet peak assumes)."""
    rows = _annotations(regimes)
    gemm = rows.filter((pl.col("name") == "big_gemm_bf16") & pl.col("tensor_util_pct").is_not_null())
    assert gemm.height >= 1
    for row in gemm.iter_rows(named=True):
        assert row["tensor_util_pct"] > 80
        assert row["tensor_util_pct"] >= row["pct_of_peak_flops"] - 5
    elem = rows.filter((pl.col("name") == "elementwise_gb") & pl.col("dram_bw_util_pct").is_not_null())
    assert elem.height >= 1
    # A 100 ms sample rarely sits wholly inside a 120 ms region: the best-placed one matches.
    diffs = [abs(r["dram_bw_util_pct"] - r["pct_of_peak_bw"]) for r in elem.iter_rows(named=True)]
    assert min(diffs) < 5
    assert max(diffs) < 25


@pytest.mark.parametrize(("size", "label"), [(64, "overhead"), (256, "overhead"), (1024, "overhead"), (4096, "compute")])
def test_mm_sweep_verdicts(size: int, label: str, sample_trace: Callable[[str], Any]) -> None:
    result = run_one(sample_trace(f"mm_sweep_{size}"), "bound", AnalysisConfig())
    steps = result.regions.filter(pl.col("kind") == "step")
    assert steps.height == 3
    assert set(steps["label"].to_list()) == {label}
    whole = result.regions.filter(pl.col("kind") == "trace").row(0, named=True)
    assert whole["label"] == label


def test_mm_sweep_gets_busier_and_faster_as_matrices_grow(sample_trace: Callable[[str], Any]) -> None:
    rows = [
        run_one(sample_trace(f"mm_sweep_{n}"), "bound", AnalysisConfig()).regions.filter(pl.col("kind") == "trace").row(0, named=True)
        for n in (64, 256, 1024, 4096)
    ]
    busy = [r["busy_pct"] for r in rows]
    tflops = [r["tflops"] for r in rows]
    assert busy == sorted(busy)
    assert tflops == sorted(tflops)
    assert busy[0] < 20 and busy[-1] > 90


def test_json_is_safe_and_has_the_documented_fields(regimes: bound.BoundResult) -> None:
    data = regimes.to_dict()
    text = json.dumps(data, allow_nan=False)
    assert "NaN" not in text
    required = {"name", "kind", "start_ns", "dur_ns", "label", "confidence", "busy_pct", "tflops", "tbps", "intensity", "pct_of_roofline"}
    assert data["regions"]
    for region in data["regions"]:
        assert required <= set(region)
        for value in region.values():
            assert not (isinstance(value, float) and not math.isfinite(value))
    assert data["roofline_available"] is True
    assert data["peaks"]["key"] == "h200-sxm"
    assert data["ops"] and data["kernels"]


def _renamed_device(trace: Trace, name: str) -> Trace:
    dev = dataclasses.replace(trace.meta.devices[0], name=name)
    return dataclasses.replace(trace, meta=dataclasses.replace(trace.meta, devices=(dev,)))


def test_unknown_device_without_peaks_still_labels_idle_regions(sample_trace: Callable[[str], Any]) -> None:
    trace = _renamed_device(sample_trace("regimes"), "Mystery Accelerator 9000")
    result = run_one(trace, "bound", AnalysisConfig())
    assert not result.roofline_available
    assert result.roofline_reason and "--peak-tflops" in result.roofline_reason
    labels = dict(_annotations(result).select("name", "label").unique().iter_rows())
    assert labels["tiny_matmuls"] == "overhead"
    assert labels["host_sleep"] == "host"
    assert labels["item_sync"] == "sync"
    # Without peaks the busy regions are "unknown" (no family guess), naming the missing peaks.
    for name in ("big_gemm_bf16", "elementwise_gb"):
        row = _annotations(result).filter(pl.col("name") == name).row(0, named=True)
        assert row["label"] == "unknown" and row["confidence"] == "low"
        assert "device peaks" in row["reason"] and "missing" in row["reason"]
        assert row["pct_of_roofline"] is None and "of roofline" not in row["reason"]
    # With user peaks the roofline comes back.
    given = run_one(trace, "bound", AnalysisConfig(peak_tflops=989.5, peak_bw_tbps=4.8))
    assert given.roofline_available
    gemm = _annotations(given).filter(pl.col("name") == "big_gemm_bf16").row(0, named=True)
    assert gemm["label"] == "compute" and gemm["ridge"] == pytest.approx(989.5 / 4.8)


def test_without_shapes_labels_are_family_guesses(sample_trace: Callable[[str], Any]) -> None:
    trace = sample_trace("regimes")
    blank = dataclasses.replace(trace, events=trace.events.with_columns(pl.lit(None, dtype=pl.String).alias("input_dims")))
    result = run_one(blank, "bound", AnalysisConfig())
    assert any("no input shapes" in n for n in result.notes)
    rows = {r["name"]: r for r in _annotations(result).iter_rows(named=True)}
    assert rows["big_gemm_bf16"]["label"] == "compute"
    assert rows["elementwise_gb"]["label"] == "memory"
    assert rows["big_gemm_bf16"]["confidence"] in ("low", "medium")
    assert "guessed from kernel families" in rows["big_gemm_bf16"]["reason"]
    assert rows["big_gemm_bf16"]["tflops"] is None


def test_without_gap_causes_short_kernels_still_mean_overhead(
    sample_trace: Callable[[str], Any],
) -> None:
    # No gaps result among the inputs: the labels fall back to the kernels' own evidence.
    result = bound.run(sample_trace("mm_sweep_64"), AnalysisConfig(), Inputs())
    assert not result.gap_causes_available
    steps = result.regions.filter(pl.col("kind") == "step")
    assert set(steps["label"].to_list()) == {"overhead"}
    assert all("shorter than their launch" in r for r in steps["reason"].to_list())


def test_op_and_kernel_tables(regimes: bound.BoundResult) -> None:
    ops = regimes.ops
    big = ops.filter((pl.col("name") == "aten::mm") & pl.col("shapes").str.contains("8192")).row(0, named=True)
    assert big["label"] == "compute"
    assert big["flops"] == pytest.approx(big["calls"] * 2 * 8192**3, rel=1e-6)
    small = ops.filter((pl.col("name") == "aten::mm") & pl.col("shapes").str.contains("32,32")).row(0, named=True)
    assert small["label"] == "overhead"
    kernels = regimes.kernels
    assert kernels.filter(pl.col("name").str.starts_with("nvjet"))["label"].to_list() == ["compute"]
    assert set(kernels.filter(pl.col("family") == "elementwise")["label"].to_list()) <= {"memory", "overhead"}


def test_cpu_only_trace_is_not_available(tmp_path: Any) -> None:
    """Hand-made trace with host ops only."""
    path = write_trace(tmp_path / "cpu.json", [op("aten::add", 1.0, 5.0), op("aten::mul", 10.0, 5.0)])
    result = run_one(load(path, cache=False), "bound", AnalysisConfig())
    assert not result.available
    assert result.reason and "no GPU" in result.reason
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("name", ["train_eager", "train_compiled", "train_cudagraphs", "dataloader_w0"])
def test_renders_on_other_samples(name: str, sample_trace: Callable[[str], Any]) -> None:
    result = run_one(sample_trace(name), "bound", AnalysisConfig())
    assert result.available
    assert result.regions.filter(pl.col("kind") == "trace").height == 1
    assert set(result.regions["label"].to_list()) <= set(bound.LABELS)
    console = Console(file=io.StringIO(), width=160)
    console.print(render_terminal(result))
    for by in ("op", "kernel"):
        console.print(render_by(result, by))
    json.dumps(result.to_dict(), allow_nan=False)


def test_dataloader_steps_are_data_bound(sample_trace: Callable[[str], Any]) -> None:
    steps = run_one(sample_trace("dataloader_w0"), "bound", AnalysisConfig()).regions.filter(pl.col("kind") == "step")
    assert set(steps["label"].to_list()) == {"data"}


def test_cli_json_and_terminal(tmp_path: Any) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["bound", str(sample_path("mm_sweep_4096")), "--by", "kernel", "--format", "json", "--no-cache"])
    assert code == 0
    data = json.loads(out.getvalue())
    assert (data["kind"], data["options"]["by"]) == ("bound", "kernel")
    assert data["bound"]["regions"][0]["kind"] == "trace"
    devices = tmp_path / "dev.toml"
    devices.write_text("[device]\nname = 'slow part'\nbf16_tflops = 100\nfp32_tflops = 10\nmem_bw_tbps = 1\n")
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["bound", str(sample_path("mm_sweep_4096")), "--devices", str(devices), "--by", "op"])
    assert code == 0
    assert "slow part" in out.getvalue()
    assert main(["bound", str(sample_path("mm_sweep_4096")), "--by", "nothing"]) == 2
    assert main(["bound", str(sample_path("mm_sweep_4096")), "--devices", str(devices), "--peak-bw", "1"]) == 2


def _gemm_trace(tmp_path: Any, tensor_util: float) -> Trace:
    """Hand-made trace: a 300 ms annotation holding one slow 16384³ bf16 GEMM (about 3 % of
    an H100's peak) and GPM samples every 100 ms reporting ``tensor_util``."""
    n = 16384
    mm_args = {"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16"] * 2, "Concrete Inputs": ["", ""]}
    events = [
        op("work", 0.0, 300_000.0, cat="user_annotation"),
        op("aten::mm", 10.0, 50.0, args=mm_args),
        launch("cudaLaunchKernel", 20.0, 5.0, 1),
        kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 30.0, 290_000.0, 1),
    ]
    for ts_ms in (150, 250, 350, 450):
        events.append({"ph": "C", "name": "gpm", "pid": 0, "ts": ts_ms * 1000.0, "args": {"tensor_util_pct": tensor_util}})
    path = write_trace(
        tmp_path / f"gemm_{tensor_util}.json",
        events,
        deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}],
    )
    return load(path, cache=False)


@pytest.mark.parametrize(("tensor_util", "confidence", "verdict"), [(95.0, "high", "(agrees)"), (2.0, "low", "(disagrees)")])
def test_counters_raise_or_lower_confidence(tmp_path: Any, tensor_util: float, confidence: str, verdict: str) -> None:
    result = run_one(_gemm_trace(tmp_path, tensor_util), "bound", AnalysisConfig())
    row = result.regions.filter(pl.col("name") == "work").row(0, named=True)
    assert row["label"] == "compute"
    # Far below the roofline on its own: medium; the counters move it one step.
    assert row["pct_of_roofline"] < 20
    assert row["tensor_util_pct"] == pytest.approx(tensor_util)
    assert row["confidence"] == confidence
    assert verdict in row["evidence"]
