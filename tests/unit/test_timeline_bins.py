"""The GPU strip's bins: what most of each bin's time was, in runs, and the steps beside it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceinsight as ti
from tests.handmade import HandMadeTrace
from traceinsight.analysis.lib.timeline_bins import device_runs, host_steps


def _trace(tmp_path: Path) -> ti.Trace:
    # two steps of 100 µs: a kernel busy for the first 60 µs of each, then nothing
    t = HandMadeTrace()
    for n in range(2):
        t.step(n + 1, n * 100.0, 100.0)
        t.gpu("elementwise_kernel", n * 100.0 + 10.0, 60.0)
    return ti.load(t.write(tmp_path / "t.json"), cache=False)


def test_bins_are_busy_where_the_gpu_ran_and_the_gap_cause_elsewhere(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    lo = int(trace.kernels["ts_ns"].min())  # type: ignore[arg-type]
    # the first step's idle tail is a gap with a cause; the second's is below the threshold
    gaps = pl.DataFrame({"start_ns": [lo + 60_000], "end_ns": [lo + 100_000], "cause": ["host"]})
    runs = device_runs(trace, gaps, 0, lo, lo + 160_000, 16)
    assert runs["state"].to_list() == ["busy", "host", "busy"]
    assert runs.select("b0", "b1").rows() == [(0, 5), (6, 9), (10, 15)]
    assert runs["busy_pct"][0] == pytest.approx(100.0) and runs["busy_pct"][1] == pytest.approx(0.0)


def test_steps_come_from_the_traces_own_definition(tmp_path: Path) -> None:
    what, steps = host_steps(_trace(tmp_path))
    assert what == "steps"
    assert steps["label"].to_list() == ["ProfilerStep#1", "ProfilerStep#2"]
    assert (steps["end_ns"] - steps["start_ns"]).to_list() == [100_000, 100_000]
