"""Device time breakdown: parts sum to the window, priorities, memcpy kinds, per-stream view."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import sample_names
from tests.handmade import HandMadeTrace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections import breakdown
from traceinsight.analysis.sections.overview import analysis_window
from traceinsight.trace.loader import load

CFG = AnalysisConfig()


@pytest.mark.parametrize("name", sample_names())
def test_parts_sum_exactly_to_the_window_on_every_sample(name: str, sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace(name)
    result = breakdown.run(trace, CFG)
    assert result.available, result.reason
    lo, hi = analysis_window(trace)
    assert result.window_ns == hi - lo > 0
    sums = result.by_device.group_by("device").agg(pl.col("dur_ns").sum())
    assert sums["dur_ns"].to_list() == [result.window_ns] * sums.height
    assert (result.by_device["dur_ns"] >= 0).all()
    assert abs(float(result.by_device["share"].sum()) - sums.height) < 1e-9
    per_stream = result.by_stream.group_by("device", "stream").agg(pl.col("dur_ns").sum())
    assert (per_stream["dur_ns"] == result.window_ns).all()
    # Busy of the device (streams merged) never exceeds the sum over its streams.
    busy_device = result.by_device.filter(pl.col("category") != "idle")["dur_ns"].sum()
    busy_streams = result.by_stream.filter(pl.col("category") != "idle")["dur_ns"].sum()
    assert busy_device <= busy_streams


def test_gemm_bf16_is_compute_busy(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = breakdown.run(sample_trace("gemm_bf16"), CFG)
    summary = result.devices.row(0, named=True)
    # The recorded window opens on ~0.14 s of warm-up before the first recorded kernel; from
    # the first to the last GPU work the device is essentially always busy.
    assert summary["active_busy_share"] > 0.9
    assert result.device_total(0, "compute") > 0.9 * summary["busy_ns"]


def test_dataloader_bound_run_is_mostly_idle(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = breakdown.run(sample_trace("dataloader_w0"), CFG)
    assert result.device_total(0, "idle") / result.window_ns > 0.5


def _overlapping(tmp_path: Path) -> breakdown.BreakdownResult:
    # Hand-made trace: compute on stream 7 overlaps NCCL on stream 20, which overlaps a copy.
    t = HandMadeTrace()
    t.step(1, 0, 100)
    t.gpu("gemm", 10, 20)  # 10..30
    t.gpu("ncclDevKernel_AllReduce_Sum_f32", 15, 30, stream=20)  # 15..45
    t.gpu("Memcpy HtoD (Pageable -> Device)", 40, 10, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")  # 40..50
    t.gpu("Memcpy DtoH (Device -> Pinned)", 60, 5, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    t.gpu("Memcpy DtoD (Device -> Device)", 66, 4, cat="gpu_memcpy", launch_name="cudaMemcpyAsync")
    t.gpu("Memset (Device)", 70, 2, cat="gpu_memset", launch_name="cudaMemsetAsync")
    t.gpu("custom_collective", 80, 5, stream=21, args={"Collective name": "all_gather"})
    return breakdown.run(load(t.write(tmp_path / "overlap.json"), cache=False), CFG)


def test_overlap_goes_to_the_higher_priority_category(tmp_path: Path) -> None:
    result = _overlapping(tmp_path)
    got = dict(result.by_device.select("category", "dur_ns").iter_rows())
    assert got == {
        "compute": 20_000,
        "communication": 15_000 + 5_000,  # 30..45 and the collective named in its args
        "memcpy_h2d_pageable": 5_000,  # 45..50: 40..45 is under communication
        "memcpy_d2h_pinned": 5_000,
        "memcpy_d2d": 4_000,
        "memset": 2_000,
        "idle": 100_000 - 56_000,
    }
    assert list(got) == ["compute", "communication", "memcpy_h2d_pageable", "memcpy_d2h_pinned", "memcpy_d2d", "memset", "idle"]


def test_per_stream_view_counts_each_stream_alone(tmp_path: Path) -> None:
    result = _overlapping(tmp_path)
    comm = result.by_stream.filter((pl.col("stream") == 20) & (pl.col("category") == "communication"))
    assert comm["dur_ns"].to_list() == [30_000]  # all of it, though compute overlaps it
    h2d = result.by_stream.filter(pl.col("category") == "memcpy_h2d_pageable")
    assert h2d["dur_ns"].to_list() == [10_000]


def test_busy_intervals_merge_streams(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.gpu("a", 10, 20)
    t.gpu("b", 25, 10, stream=8)
    t.gpu("c", 50, 1)
    busy = breakdown.busy_intervals(load(t.write(tmp_path / "b.json"), cache=False))
    origin = int(busy["start_ns"].min())  # type: ignore[arg-type]
    assert [(s - origin, e - origin) for _, s, e in busy.iter_rows()] == [(0, 25_000), (40_000, 41_000)]


def test_cpu_only_trace_is_not_available(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.host("aten::add", 0, 10)
    result = breakdown.run(load(t.write(tmp_path / "cpu.json"), cache=False), CFG)
    assert not result.available
    assert "no GPU" in (result.reason or "")
    assert result.to_dict()["by_device"] == []


def test_ddp_all_reduces_count_as_communication(sample_trace) -> None:
    from traceinsight.analysis.core.base import AnalysisConfig
    from traceinsight.analysis.sections import breakdown

    result = breakdown.run(sample_trace("ddp_train.rank0"), AnalysisConfig())
    shares = {row["category"]: row["dur_ns"] for row in result.by_device.iter_rows(named=True)}
    assert shares.get("communication", 0) > 0.2 * sum(shares.values())
    assert sum(shares.values()) == result.window_ns
