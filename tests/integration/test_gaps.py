"""Idle gaps: detection, causes read from the host, culprits, summaries and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import sample_names, sample_path
from tests.handmade import HandMadeTrace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.sections import gaps
from traceinsight.analysis.sections.breakdown import run as run_breakdown
from traceinsight.cli.app import main
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

CFG = AnalysisConfig()


def scenario(tmp_path: Path) -> Trace:
    """Hand-made: one host thread, one stream, a gap of each kind (times in µs)."""
    t = HandMadeTrace()
    t.step(1, 0, 1000)
    # Ops that launch slowly: the GPU waits on dispatch.
    t.host("aten::add", 0, 30)
    t.gpu("k1", 20, 5, launch_ts=10)
    t.host("aten::add", 40, 30)
    t.gpu("k2", 65, 5, launch_ts=55)
    # .item(): a copy, then the host blocks in a sync until it returns, then catches up.
    t.host("aten::item", 80, 70)
    t.host("aten::_local_scalar_dense", 81, 68)
    t.gpu("Memcpy DtoH (Device -> Pageable)", 100, 10, cat="gpu_memcpy", launch_ts=85, launch_name="cudaMemcpyAsync")
    t.host("cudaStreamSynchronize", 90, 55, cat="cuda_runtime")
    t.host("aten::mul", 160, 20)
    t.gpu("k3", 175, 5, launch_ts=170)
    # Data loading on the main thread, with CPU ops inside.
    t.host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 200, 300, cat="user_annotation")
    t.host("aten::randn", 210, 250)
    t.host("aten::mul", 510, 20)
    t.gpu("k4", 525, 5, launch_ts=520)
    # The host sleeps inside an annotation: nothing traced.
    t.host("host_sleep", 540, 260, cat="user_annotation")
    t.host("aten::mul", 810, 20)
    t.gpu("k5", 825, 5, launch_ts=820)
    # k6 was launched before k5 ended, yet starts late: the device waited on something else.
    t.host("aten::mul", 826, 5)
    t.gpu("k6", 900, 5, launch_ts=826)
    # CPU work that launches nothing.
    t.host("aten::cpu_thing", 910, 80)
    t.host("aten::mul", 990, 9)
    t.gpu("k7", 997, 3, launch_ts=992, launch_dur=1)
    return load(t.write(tmp_path / "scenario.json"), cache=False)


def test_each_gap_gets_its_cause_and_culprit(tmp_path: Path) -> None:
    found = gaps.find_gaps(scenario(tmp_path), 10_000)
    origin = 0  # the window starts with ProfilerStep#1 at ts 0
    rows = [
        (r["start_ns"] - origin, r["dur_ns"], r["cause"], r["culprit"])
        for r in found.iter_rows(named=True)
    ]
    assert rows == [
        (0, 20_000, "launch_overhead", "aten::add"),
        (25_000, 40_000, "launch_overhead", "aten::add"),
        (70_000, 30_000, "sync", "aten::_local_scalar_dense"),
        (110_000, 65_000, "sync", "aten::_local_scalar_dense"),
        (180_000, 345_000, "data_loading", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
        (530_000, 295_000, "untraced", "host_sleep"),
        (830_000, 70_000, "device_wait", None),
        (905_000, 92_000, "host_compute", "aten::cpu_thing"),
    ]
    assert (found["step"] == 1).all()
    # The host-class columns split every gap exactly.
    parts = pl.sum_horizontal([pl.col(f"{c}_ns") for c in (*gaps.HOST_CLASSES, gaps.UNTRACED)])
    assert (found.select(parts.alias("parts"))["parts"] == found["dur_ns"]).all()


def test_frame_contract(tmp_path: Path) -> None:
    found = gaps.find_gaps(scenario(tmp_path), 10_000)
    for col, dtype in gaps.GAP_SCHEMA.items():
        assert found.schema[col] == dtype, col
    assert list(found.columns[: len(gaps.GAP_SCHEMA)]) == list(gaps.GAP_SCHEMA)
    assert (found["end_ns"] - found["start_ns"] == found["dur_ns"]).all()
    culprits = found.filter(pl.col("culprit_id").is_not_null())
    trace = scenario(tmp_path)
    names = culprits.join(trace.events.select(pl.col("id").alias("culprit_id"), "name"), on="culprit_id")
    assert (names["name"].cast(pl.String) == names["culprit"]).all()


def test_threshold_filters_and_summary_adds_up(tmp_path: Path) -> None:
    trace = scenario(tmp_path)
    result = gaps.run(trace, AnalysisConfig(gap_threshold_ns=50_000))
    assert result.gap_count == 5
    assert (result.gaps["dur_ns"] >= 50_000).all()
    assert result.by_cause["idle_ns"].sum() == result.gap_idle_ns
    assert result.by_cause["idle_ns"].to_list() == sorted(result.by_cause["idle_ns"].to_list(), reverse=True)
    assert abs(float(result.by_cause["share"].sum()) - 1.0) < 1e-9
    assert result.histogram["gaps"].sum() == result.gap_count
    assert result.histogram["lo_ns"][0] == 50_000
    assert result.top["dur_ns"].to_list() == sorted(result.gaps["dur_ns"].to_list(), reverse=True)[: CFG.top_n]
    # All idle: gaps plus what falls below the threshold.
    breakdown = run_breakdown(trace, CFG)
    assert result.idle_ns == breakdown.device_total(0, "idle")
    json.dumps(result.to_dict(), allow_nan=False)
    assert "gaps" not in result.to_dict()
    assert len(result.to_dict(full=True)["gaps"]) == result.gap_count


def test_dataloader_bound_run_waits_on_data(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = gaps.run(sample_trace("dataloader_w0"), CFG)
    assert result.top_cause == "data_loading"
    assert result.by_cause["share"][0] > 0.5
    assert "DataLoader" in result.culprits["culprit"][0]


def test_tiny_kernel_loop_is_launch_bound(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = gaps.run(sample_trace("tiny_kernels"), CFG)
    assert result.top_cause == "launch_overhead"
    assert result.by_cause["share"][0] > 0.5


def test_regimes_are_told_apart(sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("regimes")
    found = gaps.find_gaps(trace, CFG.gap_threshold_ns)
    by_culprit = found.group_by("culprit").agg(pl.col("dur_ns").sum(), pl.col("cause").mode().first())
    causes = dict(by_culprit.select("culprit", "cause").iter_rows())
    assert causes["host_sleep"] == "untraced"
    assert causes["aten::_local_scalar_dense"] == "sync"
    assert causes["aten::mm"] == "launch_overhead"
    sleep = by_culprit.filter(pl.col("culprit") == "host_sleep")["dur_ns"].item()
    assert sleep > 0.5 * float(found["dur_ns"].sum())


@pytest.mark.parametrize("name", sample_names())
def test_gaps_are_idle_and_within_the_window(name: str, sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace(name)
    result = gaps.run(trace, CFG)
    found = result.gaps
    assert (found["dur_ns"] >= CFG.gap_threshold_ns).all()
    assert (found["start_ns"] >= result.window_start_ns).all()
    assert (found["end_ns"] <= result.window_end_ns).all()
    assert set(found["cause"].unique().to_list()) <= set(gaps.CAUSES)
    assert result.gap_idle_ns <= result.idle_ns
    work = trace.kernels.select("device", pl.col("ts_ns").alias("start_ns"), "end_ns")
    overlap = intervals.intersection(found.select("device", "start_ns", "end_ns"), work, by=["device"])
    assert overlap.height == 0


def test_cli_lists_gaps_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["gaps", str(sample_path("tiny_kernels")), "--format", "json", "--threshold-us", "20", "--no-cache"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["kind"], doc["sections"]) == ("gaps", ["gaps"])
    data = doc["gaps"]
    assert data["threshold_ns"] == 20_000
    assert len(data["gaps"]) == data["gap_count"] > 0
    assert set(gaps.GAP_SCHEMA) <= set(data["gaps"][0])
    assert data["by_cause"][0]["cause"] == "launch_overhead"


def test_cli_terminal_with_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["gaps", str(sample_path("dataloader_w0")), "--limit", "3"])
    assert code == 0
    out = capsys.readouterr().out
    assert "data_loading" in out
    assert "3 of " in out


def test_cli_rejects_bad_format() -> None:
    assert main(["gaps", str(sample_path("tiny_kernels")), "--format", "xml"]) == 2


def test_cpu_only_trace_is_not_available(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.host("aten::add", 0, 10)
    result = gaps.run(load(t.write(tmp_path / "cpu.json"), cache=False), CFG)
    assert not result.available
    assert gaps.find_gaps(load(tmp_path / "cpu.json", cache=False), 10_000).height == 0


def test_python_frames_and_data_loading_frames(tmp_path: Path) -> None:
    # Hand-made with_stack-like trace: Python frames alone, then a DataLoader frame.
    t = HandMadeTrace()
    t.step(1, 0, 400)
    t.host("aten::add", 0, 10)
    t.gpu("k1", 8, 2, launch_ts=4)
    t.host("train.py(12): loss_fn", 15, 80, cat="python_function")
    t.host("aten::add", 100, 10)
    t.gpu("k2", 108, 2, launch_ts=104)
    t.host("torch/utils/data/dataloader.py(733): __next__", 115, 200, cat="python_function")
    t.host("aten::add", 320, 10)
    t.gpu("k3", 328, 2, launch_ts=324)
    found = gaps.find_gaps(load(t.write(tmp_path / "stack.json"), cache=False), 10_000)
    causes = dict(zip(found["start_ns"].to_list(), found["cause"].to_list(), strict=True))
    assert causes[10_000] == "python"
    assert causes[110_000] == "data_loading"


@pytest.mark.parametrize("call", ["cudaMalloc", "cudaFree", "hipMalloc", "cuMemAlloc_v2"])
def test_allocator_calls_are_their_own_cause_not_launch_overhead(tmp_path: Path, call: str) -> None:
    # Hand-made: an op that allocates from the driver (the caching allocator missed) before its
    # launch; the GPU idles while the host sits in the allocator's call, then in the launch.
    t = HandMadeTrace()
    t.step(1, 0, 300)
    t.host("aten::add", 0, 10)
    t.gpu("k1", 8, 2, launch_ts=4)
    t.host("aten::empty", 20, 200)
    t.host(call, 25, 150, cat="cuda_driver" if call.startswith("cu") and not call.startswith("cuda") else "cuda_runtime")
    t.host("aten::add", 230, 40)
    t.gpu("k2", 268, 2, launch_ts=232, launch_dur=30)
    found = gaps.find_gaps(load(t.write(tmp_path / "alloc.json"), cache=False), 10_000)
    row = found.filter(pl.col("start_ns") == 10_000).row(0, named=True)
    assert row["cause"] == "allocator" and row["culprit"] == "aten::empty"
    # 10–268 µs: untraced 10–20 and 220–230, aten::empty's own 50 µs, the call's 150 µs, the
    # launching aten::add 230–268
    assert (row["allocator_ns"], row["host_compute_ns"], row["launch_overhead_ns"], row["untraced_ns"]) == (
        150_000, 50_000, 38_000, 20_000,
    )


# -- the histogram's buckets, the top gaps' order, a gap in a sync that turned to host work ----


def _gap_frame(durations_ns: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"dur_ns": durations_ns}, schema={"dur_ns": pl.Int64})


def test_histogram_buckets_are_decades_from_the_threshold_and_hold_a_gap_on_an_edge() -> None:
    # threshold 10 µs: a 25 µs gap in [10, 100) µs, one of exactly 100 µs in [100, 1000) µs
    hist = gaps._histogram(_gap_frame([25_000, 100_000]), 10_000)
    rows = [(r["lo_ns"], r["hi_ns"], r["gaps"]) for r in hist.iter_rows(named=True)]
    assert rows == [(10_000, 100_000, 1), (100_000, 1_000_000, 1)]


def test_histogram_of_a_single_gap() -> None:
    hist = gaps._histogram(_gap_frame([55_000]), 10_000)
    assert hist["gaps"].to_list() == [1] and hist["idle_ns"].to_list() == [55_000]


def test_top_gaps_of_equal_length_come_in_time_order() -> None:
    frame = pl.DataFrame(
        {c: [None, None, None] for c in gaps.GAP_SCHEMA}, schema=gaps.GAP_SCHEMA
    ).with_columns(
        start_ns=pl.Series([300, 100, 200], dtype=pl.Int64),
        dur_ns=pl.Series([50, 50, 50], dtype=pl.Int64),
        cause=pl.lit("untraced"),
    )
    top = gaps.summarise(frame, 10, 2, devices=1, idle_ns=150, window=(0, 1000)).top
    assert top["start_ns"].to_list() == [100, 200]


def test_gap_begun_in_a_sync_then_spent_in_host_compute_is_host_compute(tmp_path: Path) -> None:
    # The host leaves a synchronize (the queue drained) and computes on the CPU: only launching
    # after a sync is charged to the sync; CPU work is the host's own.
    t = HandMadeTrace()
    t.step(1, 0, 300)
    t.host("aten::add", 0, 10)
    t.gpu("k1", 8, 2, launch_ts=4)
    t.host("cudaDeviceSynchronize", 9, 8, cat="cuda_runtime")
    t.host("aten::cpu_thing", 20, 200)
    t.host("aten::add", 225, 10)
    t.gpu("k2", 233, 2, launch_ts=227)
    found = gaps.find_gaps(load(t.write(tmp_path / "sync_cpu.json"), cache=False), 10_000)
    row = found.filter(pl.col("start_ns") == 10_000).row(0, named=True)
    assert row["sync_ns"] == 7_000 and row["cause"] == "host_compute"


def test_a_gap_with_no_host_thread_to_read_is_all_untraced(tmp_path: Path) -> None:
    # A GPU-only trace (no launches, no host events): nothing says what the host did
    from tests.handmade import kernel

    t = HandMadeTrace()
    t.events.append(kernel("k1", 8, 2, 998))
    t.events.append(kernel("k2", 233, 2, 999))
    found = gaps.find_gaps(load(t.write(tmp_path / "gpu_only.json"), cache=False), 10_000)
    row = found.filter(pl.col("dur_ns") == 223_000).row(0, named=True)
    assert row["untraced_ns"] == row["dur_ns"]
    assert all(row[f"{c}_ns"] == 0 for c in gaps.HOST_CLASSES)
