"""``traceinsight diff``: verdicts, alignment, per-step normalisation, renderers and exit codes.

Most cases run on small hand-made Kineto-like traces (written below, not recorded by a
profiler) whose step times are known; the last group checks the recorded sample pairs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import sample_path
from traceinsight.analysis.diff.compare import (
    DiffOptions,
    DiffResult,
    contributions,
    diff_traces,
    label_for,
)
from traceinsight.analysis.lib.stats import min_rank_p
from traceinsight.api import diff
from traceinsight.cli.app import main
from traceinsight.errors import EXIT_REGRESSION, EXIT_USAGE
from traceinsight.render import envelope
from traceinsight.render.diff.html import render_diff_html
from traceinsight.render.diff.view import change_pct
from traceinsight.render.units import ns

BASE_NS = 1_700_000_000_000_000_000


def hand_made_trace(
    path: Path,
    kernel_us: list[float],
    *,
    kernels: tuple[str, ...] = ("gemm_kernel_a", "elementwise_kernel_b"),
    device_name: str = "Hand-made GPU",
    step_gap_us: float = 50.0,
    jitter_us: tuple[float, ...] = (0.0, 1.5, -1.0, 2.0, -0.5, 0.5, -1.5, 1.0),
) -> Path:
    """A trace with one ProfilerStep per entry of ``kernel_us``.

    Each step launches every kernel in ``kernels`` back to back from an ``aten::mm`` op inside a
    ``fwd`` annotation; each kernel lasts ``kernel_us[i] / len(kernels)`` µs (plus a small
    jitter so that ranks have no ties).
    """
    events: list[dict[str, Any]] = []
    ts = 0.0
    corr = 1
    for i, total in enumerate(kernel_us):
        per_kernel = total / len(kernels) + jitter_us[i % len(jitter_us)] / len(kernels)
        host_dur = 20.0 + 10.0 * len(kernels)
        step_dur = max(host_dur + 10.0, per_kernel * len(kernels) + 30.0)
        events.append(_x("user_annotation", f"ProfilerStep#{i}", ts, step_dur, 100, 1, {}))
        events.append(_x("user_annotation", "fwd", ts + 1, host_dur, 100, 1, {}))
        events.append(_x("cpu_op", "aten::mm", ts + 2, host_dur - 2, 100, 1, {"External id": i + 1, "Input Dims": [[64, 64], [64, 64]]}))
        gpu_ts = ts + 10.0
        for j, name in enumerate(kernels):
            launch = ts + 3.0 + 10.0 * j
            events.append(_x("cuda_runtime", "cudaLaunchKernel", launch, 5.0, 100, 1, {"correlation": corr, "External id": i + 1}))
            events.append(_x("kernel", name, gpu_ts, per_kernel, 0, 7, {"correlation": corr, "device": 0, "stream": 7}))
            gpu_ts += per_kernel
            corr += 1
        ts += step_dur + step_gap_us
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device_name, "totalGlobalMem": 80 * 2**30, "numSms": 132}],
        "baseTimeNanoseconds": BASE_NS,
        "traceEvents": events,
    }
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    before = hand_made_trace(tmp_path / "base.json", [1000.0] * 8)
    after = hand_made_trace(tmp_path / "slow.json", [1500.0] * 8)
    return before, after


# ---- verdicts ------------------------------------------------------------------------------


def test_trace_against_itself_is_no_change(pair: tuple[Path, Path]) -> None:
    result = diff(pair[0], pair[0])
    assert result.verdict == "no_significant_change"
    assert result.step_time.ratio == pytest.approx(1.0)
    assert result.step_time.ci_low is not None and result.step_time.ci_low <= 1.0 <= (result.step_time.ci_high or 0)
    assert result.gpu_delta_ns_per_step == pytest.approx(0.0)
    # The same stem on both sides still gives two distinct, deterministic labels.
    assert result.before_label == "base (before)" and result.after_label == "base (after)"


def test_slower_run_is_detected_and_explained(pair: tuple[Path, Path]) -> None:
    result = diff(*pair)
    st = result.step_time
    assert result.verdict == "slower"
    assert st.n_before == 8 and st.n_after == 8
    assert st.ratio is not None and 1.3 < st.ratio < 1.6
    assert st.ci_low is not None and st.ci_low > 1.0
    assert st.p_value is not None and st.p_value < 0.05
    # Each kernel grew by ~250 µs per step; both show up with the right sign.
    deltas = dict(zip(result.kernels["name"].to_list(), result.kernels["delta_ns_per_step"].to_list(), strict=True))
    assert deltas["gemm_kernel_a"] == pytest.approx(250_000, rel=0.02)
    assert deltas["elementwise_kernel_b"] == pytest.approx(250_000, rel=0.02)
    assert result.kernels["share_of_delta"].sum() == pytest.approx(1.0)
    assert result.regions.filter(pl.col("region") == "fwd")["delta_ns_per_step"].item() == pytest.approx(500_000, rel=0.02)
    op = result.ops.row(0, named=True)
    assert op["op"] == "aten::mm" and op["input_dims"] == "[[64,64],[64,64]]"


def test_faster_run_is_detected(pair: tuple[Path, Path]) -> None:
    assert diff(pair[1], pair[0]).verdict == "faster"


def test_thin_evidence_is_no_change_with_reason(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "a.json", [1000.0, 1001.0])
    after = hand_made_trace(tmp_path / "b.json", [3000.0, 3001.0])
    result = diff(before, after)
    assert result.verdict == "no_significant_change"
    assert "too few samples" in result.step_time.verdict_reason
    assert result.step_time.ratio is not None and result.step_time.ratio > 2.5


def test_runs_of_different_length_compare_per_step(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "long.json", [1000.0] * 8)
    after = hand_made_trace(tmp_path / "short.json", [1000.0] * 4)
    result = diff(before, after)
    assert result.before_steps == 8 and result.after_steps == 4
    kc = result.kernel_counts
    assert kc["before_kernels_per_step"] == kc["after_kernels_per_step"] == 2
    assert abs(result.gpu_delta_ns_per_step or 0.0) < 0.01 * (kc["before_gpu_ns_per_step"] or 1)
    assert any("step counts differ" in n for n in result.notes)
    assert result.verdict == "no_significant_change"


def test_added_and_removed_kernels(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "eager.json", [1000.0] * 6, kernels=("k_gemm", "k_add", "k_mul"))
    after = hand_made_trace(tmp_path / "fused.json", [900.0] * 6, kernels=("k_gemm", "triton_poi_fused_add_mul_0"))
    result = diff(before, after)
    assert result.added_kernels == ("triton_poi_fused_add_mul_0",)
    assert set(result.removed_kernels) == {"k_add", "k_mul"}
    status = dict(zip(result.kernels["name"].to_list(), result.kernels["status"].to_list(), strict=True))
    assert status == {"k_gemm": "both", "k_add": "removed", "k_mul": "removed", "triton_poi_fused_add_mul_0": "added"}
    family = dict(zip(result.kernels["name"].to_list(), result.kernels["family"].to_list(), strict=True))
    assert family["triton_poi_fused_add_mul_0"] == "elementwise"  # Inductor pointwise
    assert result.kernel_counts["before_kernels_per_step"] == 3
    assert result.kernel_counts["after_kernels_per_step"] == 2


def test_different_devices_are_flagged(tmp_path: Path) -> None:
    before = hand_made_trace(tmp_path / "h100.json", [1000.0] * 5, device_name="NVIDIA H100")
    after = hand_made_trace(tmp_path / "h200.json", [1000.0] * 5, device_name="NVIDIA H200")
    result = diff(before, after)
    assert not result.comparable
    assert result.before_device == "NVIDIA H100" and result.after_device == "NVIDIA H200"
    assert any("devices differ" in n for n in result.notes)


def test_contributions_rank_by_absolute_delta() -> None:
    before = pl.DataFrame({"name": ["a", "a", "b", "c"], "dur_ns": [100, 100, 50, 10]})
    after = pl.DataFrame({"name": ["a", "b", "b", "d"], "dur_ns": [100, 10, 10, 400]})
    table = contributions(before, after, ["name"], 2, 1)
    # |Δ|: d 400, b 5, c 5 (ties by name), a 0.
    assert table["name"].to_list() == ["d", "b", "c", "a"]
    row = {r["name"]: r for r in table.iter_rows(named=True)}
    assert row["d"]["status"] == "added" and row["d"]["delta_ns_per_step"] == 400
    assert row["c"]["status"] == "removed" and row["c"]["delta_ns_per_step"] == -5
    assert row["a"]["before_ns_per_step"] == 100 and row["a"]["after_ns_per_step"] == 100
    assert row["b"]["ratio"] == pytest.approx(20 / 25)


def test_labels_are_file_stems() -> None:
    assert label_for("runs/train_eager.json.gz") == "train_eager"
    assert label_for("x.pt.trace.json") == "x"
    assert label_for("plain") == "plain"


def test_result_json_has_no_nan_and_the_documented_keys(pair: tuple[Path, Path]) -> None:
    data = envelope.document(diff(*pair, label_before="main", label_after="pr"))
    text = json.dumps(data, allow_nan=False)
    assert "NaN" not in text
    d = data["diff"]
    assert data["schema_version"] >= 1
    assert d["verdict"] == "slower"
    assert d["before_label"] == "main" and d["after_label"] == "pr"
    for key in ("before_median_ns", "after_median_ns", "ratio", "ci_low", "ci_high"):
        assert isinstance(d["step_time"][key], float)


def test_diff_accepts_loaded_traces(pair: tuple[Path, Path]) -> None:
    from traceinsight.trace.loader import load

    result = diff_traces(load(pair[0]), load(pair[1]), DiffOptions(seed=3))
    assert result.verdict == "slower"


# ---- CLI ---------------------------------------------------------------------------------


def test_fail_on_regression_exit_codes(pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    before, after = (str(p) for p in pair)
    assert main(["diff", before, after, "--format", "json", "--fail-on-regression", "10"]) == EXIT_REGRESSION
    assert "regression" in capsys.readouterr().err
    # Slower, but not by more than the threshold.
    assert main(["diff", before, after, "--format", "json", "--fail-on-regression", "80"]) == 0
    # Faster: never a regression.
    assert main(["diff", after, before, "--format", "json", "--fail-on-regression", "0"]) == 0
    # Same run: no significant change.
    assert main(["diff", before, before, "--format", "json", "--fail-on-regression", "0"]) == 0


def test_output_file_refuses_to_overwrite(pair: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "diff.json"
    args = ["diff", str(pair[0]), str(pair[1]), "--format", "json", "-o", str(out)]
    assert main(args) == 0
    assert f"Wrote {out}" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert (data["kind"], data["inputs"]) == ("diff", {"before": str(pair[0]), "after": str(pair[1])})
    assert data["diff"]["verdict"] == "slower"
    assert main(args) == EXIT_USAGE
    assert "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0


def test_markdown_and_terminal_formats(pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    md = tmp_path / "diff.md"
    assert main(["diff", str(pair[0]), str(pair[1]), "--format", "md", "-o", str(md), "--label-before", "main"]) == 0
    text = md.read_text()
    assert text.startswith("### ")
    assert "`main` → `slow`: slower" in text
    assert "| median |" in text and "gemm_kernel_a" in text
    monkeypatch.setenv("NO_COLOR", "1")
    term = tmp_path / "diff.txt"
    assert main(["diff", str(pair[0]), str(pair[1]), "-o", str(term)]) == 0
    out = term.read_text()
    assert "slower: slow vs base" in out and "SLOWER" not in out and "\x1b[" not in out


def test_unknown_format_is_a_usage_error(pair: tuple[Path, Path]) -> None:
    assert main(["diff", str(pair[0]), str(pair[1]), "--format", "xml"]) == EXIT_USAGE


# ---- recorded sample pairs -----------------------------------------------------------------


def test_compiled_run_launches_fewer_kernels_per_step() -> None:
    result = diff(sample_path("train_eager"), sample_path("train_compiled"))
    kc = result.kernel_counts
    assert kc["after_kernels_per_step"] < kc["before_kernels_per_step"]
    assert kc["after_gpu_ns_per_step"] < kc["before_gpu_ns_per_step"]
    assert result.compile.available and result.compile.compiled_side == "train_compiled"
    assert not result.memory.available and "profile_memory" in (result.memory.reason or "")
    assert result.compile.fusion_ratio is not None and result.compile.fusion_ratio > 1.0
    assert any(name.startswith("triton_") for name in result.added_kernels)
    assert result.step_time.ratio is not None and result.step_time.ratio < 1.0


def _faster_or_thin(result: DiffResult) -> bool:
    """Faster, or not separable only because the samples are too small for the rank test."""
    st = result.step_time
    return result.verdict == "faster" or min_rank_p(st.n_before, st.n_after) >= 0.05


def test_cuda_graphs_run_is_faster_than_eager() -> None:
    result = diff(sample_path("train_eager"), sample_path("train_cudagraphs"))
    assert result.step_time.ratio is not None and result.step_time.ratio < 1.0
    assert _faster_or_thin(result)
    assert result.compile.available
    graph_launches = result.compile.metrics.filter(pl.col("key") == "graph_launches_per_step")
    assert graph_launches["before"].item() == 0 and graph_launches["after"].item() >= 1


def test_amp_on_is_faster() -> None:
    result = diff(sample_path("amp_off"), sample_path("amp_on"))
    st = result.step_time
    assert st.ratio is not None and st.ratio < 0.5
    assert st.ci_high is not None and st.ci_high < 1.0
    assert _faster_or_thin(result)
    kc = result.kernel_counts
    assert (kc["after_gpu_ns_per_step"] or 0) < 0.5 * (kc["before_gpu_ns_per_step"] or 0)
    # fp32 GEMMs go away, bf16 ones come in.
    assert any(f == "gemm" for f in result.kernels.filter(pl.col("status") == "removed")["family"].to_list())
    assert result.compile.available is False


def test_more_workers_cut_data_loading_idle() -> None:
    result = diff(sample_path("dataloader_w0"), sample_path("dataloader_w4"))
    assert result.verdict != "slower"
    assert result.step_time.ratio is not None and result.step_time.ratio < 0.5
    assert _faster_or_thin(result)
    assert result.idle_by_cause.available
    causes = {r["cause"]: r for r in result.idle_by_cause.table.iter_rows(named=True)}
    assert causes["data_loading"]["before_ns_per_step"] > 50e6
    assert causes["data_loading"]["delta_ns_per_step"] < -0.5 * causes["data_loading"]["before_ns_per_step"]
    idle = {r["category"]: r for r in result.breakdown.table.iter_rows(named=True)}["idle"]
    assert idle["delta_ns_per_step"] < 0
    st = result.step_time
    # The workers' refill stalls (every 4th step) are kept and flagged, not dropped.
    assert st.n_after == 10 and st.dropped_after == 0 and st.outliers_after == 3
    assert st.statistic == "mean" and st.after_mean_ns is not None and st.after_median_ns is not None
    assert st.after_mean_ns > st.after_median_ns
    assert st.after_total_ns == pytest.approx(st.after_mean_ns * st.n_after, rel=1e-9)
    # One denominator per table: no idle cause per step exceeds the mean step it sits in.
    for side in ("before", "after"):
        mean_step = getattr(st, f"{side}_mean_ns")
        assert causes["data_loading"][f"{side}_ns_per_step"] <= mean_step


def test_sample_against_itself_is_no_change() -> None:
    path = sample_path("train_eager")
    result = diff(path, path)
    assert result.verdict == "no_significant_change"
    assert result.step_time.ratio == pytest.approx(1.0)
    assert result.kernels["delta_ns_per_step"].abs().max() == 0
    # Recorded with profile_memory: peaks compare, and do not move.
    assert result.memory.available
    memory = {r["metric"]: r for r in result.memory.table.iter_rows(named=True)}
    assert memory["cuda:0 allocated (peak)"]["before"] > 0
    assert all(r["delta"] == 0 for r in memory.values())


def test_fail_on_regression_on_recorded_pair() -> None:
    fast, slow = str(sample_path("amp_on")), str(sample_path("amp_off"))
    result = diff(fast, slow)
    st = result.step_time
    # amp_off's every step is over twice amp_on's (ratio and interval checked here): the gate
    # must fire exactly when the step counts let the rank test reach p < 0.05 at all.
    assert st.ratio is not None and st.ratio > 2.0
    assert st.ci_low is not None and st.ci_low > 1.05
    expected = EXIT_REGRESSION if min_rank_p(st.n_before, st.n_after) < 0.05 else 0
    assert main(["diff", fast, slow, "--format", "json", "--fail-on-regression", "5"]) == expected
    assert main(["diff", slow, fast, "--format", "json", "--fail-on-regression", "5"]) == 0


def test_no_color_env_is_respected_by_console() -> None:
    from traceinsight.render.terminal import make_console

    old = os.environ.get("NO_COLOR")
    os.environ["NO_COLOR"] = "1"
    try:
        assert make_console().no_color
    finally:
        if old is None:
            del os.environ["NO_COLOR"]
        else:
            os.environ["NO_COLOR"] = old


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 10_000)), max_size=30),
    st.lists(st.tuples(st.sampled_from("cdefg"), st.integers(0, 10_000)), max_size=30),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_contributions_add_up_to_the_total_delta(
    before: list[tuple[str, int]], after: list[tuple[str, int]], b_per: int, a_per: int
) -> None:
    schema = {"name": pl.String, "dur_ns": pl.Int64}
    b = pl.DataFrame(before, schema=schema, orient="row")
    a = pl.DataFrame(after, schema=schema, orient="row")
    table = contributions(b, a, ["name"], b_per, a_per)
    assert table["name"].n_unique() == table.height == len({n for n, _ in before} | {n for n, _ in after})
    total = sum(d for _, d in after) / a_per - sum(d for _, d in before) / b_per
    assert table["delta_ns_per_step"].sum() == pytest.approx(total, abs=1e-6)
    deltas = table["delta_ns_per_step"].abs().to_list()
    assert deltas == sorted(deltas, reverse=True)
    if abs(total) > 1e-9:
        assert table["share_of_delta"].sum() == pytest.approx(1.0)
    for row in table.iter_rows(named=True):
        in_b = any(n == row["name"] for n, _ in before)
        in_a = any(n == row["name"] for n, _ in after)
        assert row["status"] == ("both" if in_b and in_a else "removed" if in_b else "added")


def test_html_page_shows_the_step_statistics(tmp_path: Path) -> None:
    # Hand-made pair; the after run has one stalled step, which is kept and flagged.
    before = hand_made_trace(tmp_path / "base.json", [1000.0] * 10)
    after = hand_made_trace(tmp_path / "stall.json", [1000.0] * 9 + [9000.0])
    result = diff(before, after)
    step_time = result.step_time
    assert step_time.outliers_after >= 1 and step_time.n_after == step_time.n_before
    page = render_diff_html(result)
    table = page[page.index("<h2>Step time (device)</h2>"):]
    table = table[: table.index("</section>")]
    rows = {
        cells[0]: cells[1:]
        for cells in (re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table))
        if cells
    }
    assert rows["steps kept"] == [str(step_time.n_before), str(step_time.n_after), ""]
    assert rows["outliers kept (flagged)"] == [str(step_time.outliers_before), str(step_time.outliers_after), ""]
    for label, bv, av in (
        ("total of kept steps", step_time.before_total_ns, step_time.after_total_ns),
        ("mean", step_time.before_mean_ns, step_time.after_mean_ns),
        ("median", step_time.before_median_ns, step_time.after_median_ns),
    ):
        assert bv is not None and av is not None
        assert rows[label] == [ns(bv), ns(av), change_pct(av / bv)]
    # The kept stall moves the mean well past the median.
    assert step_time.after_mean_ns is not None and step_time.after_median_ns is not None
    assert step_time.after_mean_ns > 1.5 * step_time.after_median_ns
