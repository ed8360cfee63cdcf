"""Samples → counter events, the capture metadata, and the atomic write."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from traceinsight.capture import counters as C
from traceinsight.capture import merge
from traceinsight.capture.nvml import Sample

BASE = 1_790_000_000_000_000_000


def kineto_like(ts_us: list[float]) -> dict:
    return {
        "schemaVersion": 1,
        "baseTimeNanoseconds": BASE,
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t, "dur": 10.0}
            for t in ts_us
        ],
    }


def test_counter_event_shape_and_time() -> None:
    s = Sample(device=1, family=C.NVML_UTILIZATION, t_ns=BASE + 1_234_567, values={"gpu_pct": 5})
    (ev,) = merge.counter_events([s], BASE)
    assert ev == {
        "ph": "C",
        "name": "nvml.utilization",
        "pid": 1,
        "tid": 0,
        "ts": 1234.567,
        "args": {"gpu_pct": 5},
    }


def test_merge_keeps_samples_in_the_trace_window_and_adds_meta() -> None:
    trace = kineto_like([1000.0, 2000.0])
    inside = Sample(0, C.NVML_UTILIZATION, BASE + 1_500_000, {C.GPU_PCT: 90})
    outside = Sample(0, C.NVML_UTILIZATION, BASE + 9_000_000, {C.GPU_PCT: 1})
    merge.merge_samples(trace, [inside, outside], {"nvml": "ok"}, fallback_base_ns=0)
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert [c["args"][C.GPU_PCT] for c in counters] == [90]
    meta = trace[C.TRACE_META_KEY]
    assert meta["capture"]["nvml"] == "ok" and meta["capture"]["n_samples"] == 1
    assert "version" in meta


def test_missing_base_time_is_added() -> None:
    relative = {"traceEvents": [{"ph": "X", "name": "a", "ts": 10.0, "dur": 1.0}]}
    assert merge.ensure_base_time(relative, fallback_ns=BASE)
    assert relative["baseTimeNanoseconds"] == BASE
    epoch = {"traceEvents": [{"ph": "X", "name": "a", "ts": 1.79e15, "dur": 1.0}]}
    merge.merge_samples(epoch, [], {}, fallback_base_ns=BASE)
    assert epoch["baseTimeNanoseconds"] == 0
    assert epoch[C.TRACE_META_KEY]["capture"]["base_time_estimated"] is True


def test_nan_never_reaches_json(tmp_path: Path) -> None:
    path = merge.write_trace_atomic({"traceEvents": [], "x": float("nan")}, tmp_path / "t.json")
    assert json.loads(path.read_text()) == {"traceEvents": [], "x": None}


def test_gz_round_trip(tmp_path: Path) -> None:
    trace = kineto_like([1.0])
    path = merge.write_trace_atomic(trace, tmp_path / "t.json.gz")
    with gzip.open(path, "rt") as f:
        assert json.load(f) == trace
    assert merge.read_trace(path) == trace


def test_failed_write_leaves_previous_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "t.json.gz"
    merge.write_trace_atomic({"traceEvents": [], "v": 1}, target)
    before = target.read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        merge.write_trace_atomic({"traceEvents": [], "v": 2}, target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json.gz"]


def test_crash_mid_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "new.json.gz"

    class Boom(gzip.GzipFile):
        def write(self, data: object) -> int:  # type: ignore[override]
            super().write(b'{"traceEv')
            raise MemoryError("killed mid-write")

    monkeypatch.setattr(merge.gzip, "GzipFile", Boom)
    with pytest.raises(MemoryError):
        merge.write_trace_atomic({"traceEvents": []}, target)
    assert list(tmp_path.iterdir()) == []
