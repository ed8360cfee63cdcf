"""Perfetto export (decoded with the perfetto protos) and ``traceinsight sql``."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import sample_path
from traceinsight.analysis.report import analyze
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.cli.app import main
from traceinsight.render.perfetto_export import Slice, assign_lanes, export_perfetto
from traceinsight.trace.schema import GPU_KINDS

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def decode(data: bytes) -> tuple[dict[int, Any], list[Any]]:
    parsed = pb.Trace()
    parsed.ParseFromString(data)
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in parsed.packet if p.HasField("track_descriptor")}
    events = [p for p in parsed.packet if p.HasField("track_event")]
    return tracks, events


def track_name(desc: Any) -> str:
    return str(desc.name or desc.thread.thread_name or desc.process.process_name)


def replay(events: list[Any]) -> tuple[dict[int, list[tuple[str, int]]], bool]:
    """Pair BEGIN/END per track like Perfetto does; returns (name, duration) per track."""
    stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
    slices: dict[int, list[tuple[str, int]]] = defaultdict(list)
    ok = True
    last_ts = 0
    for p in events:
        ev = p.track_event
        ok &= p.timestamp >= last_ts
        last_ts = p.timestamp
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stacks[ev.track_uuid].append((ev.name, p.timestamp))
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stacks[ev.track_uuid]:
                return slices, False
            name, ts = stacks[ev.track_uuid].pop()
            slices[ev.track_uuid].append((name, p.timestamp - ts))
    return slices, ok and all(not s for s in stacks.values())


@pytest.fixture(scope="module")
def exported(request: pytest.FixtureRequest) -> tuple[Any, bytes]:
    from tests.conftest import _load_sample

    trace = _load_sample("dataloader_w0")
    return trace, export_perfetto(trace, analyze(trace))


def test_every_event_survives_with_its_duration(exported: tuple[Any, bytes]) -> None:
    trace, data = exported
    tracks, events = decode(data)
    slices, balanced = replay(events)
    assert balanced, "BEGIN/END pairs must nest per track and timestamps must not go back"
    root = next(uuid for uuid, d in tracks.items() if track_name(d) == "traceinsight")
    ours = {uuid for uuid, d in tracks.items() if d.parent_uuid == root}
    assert ours, "the analysis tracks hang under the traceinsight track"
    got = Counter((name, dur) for uuid, per_track in slices.items() if uuid not in ours for name, dur in per_track)
    want = Counter((str(n), int(d)) for n, d in trace.events.filter(pl.col("dur_ns") >= 0).select(pl.col("name").cast(pl.String), "dur_ns").iter_rows())
    assert got == want


def test_analysis_and_counter_tracks(exported: tuple[Any, bytes]) -> None:
    trace, data = exported
    tracks, events = decode(data)
    names = {track_name(d) for d in tracks.values()}
    assert {"traceinsight", "idle gaps GPU 0", "steps (device)", "nvml.utilization.gpu_pct", "gpm.sm_util_pct"} <= names
    assert any(n.startswith("stream ") for n in names)
    by_name = {track_name(d): uuid for uuid, d in tracks.items()}
    slices, _ = replay(events)
    idle_by_cause: Counter[str] = Counter()
    for name, dur in slices[by_name["idle gaps GPU 0"]]:
        idle_by_cause[name] += dur
    assert idle_by_cause.most_common(1)[0][0] == "idle: data_loading"
    assert tracks[by_name["bound regions (step)"]].parent_uuid == by_name["traceinsight"]
    assert slices[by_name["bound regions (step)"]], "one slice per step region"
    counter_values = [p.track_event.double_counter_value for p in events if p.track_event.track_uuid == by_name["nvml.utilization.gpu_pct"]]
    util = trace.counters.filter((pl.col("name") == "nvml.utilization") & (pl.col("series") == "gpu_pct"))
    assert sorted(counter_values) == sorted(util["value"].to_list())
    assert tracks[by_name["nvml.utilization.gpu_pct"]].counter.unit_name == "%"


def test_timestamps_are_absolute_when_the_trace_has_a_base(exported: tuple[Any, bytes]) -> None:
    trace, data = exported
    _, events = decode(data)
    first = min(p.timestamp for p in events)
    assert first == trace.meta.base_time_ns + min(int(trace.events["ts_ns"].min()), int(trace.counters["ts_ns"].min()))


def test_overlapping_slices_go_to_extra_lanes() -> None:
    slices = [Slice(0, 10, "a"), Slice(2, 5, "b"), Slice(4, 12, "c"), Slice(11, 13, "d")]
    lanes = assign_lanes(slices)
    assert [[(s.name, d) for s, d in lane] for lane in lanes] == [[("a", 0), ("b", 1), ("d", 0)], [("c", 0)]]


def slices_by_track(data: bytes) -> tuple[dict[str, list[tuple[str, int]]], dict[str, str]]:
    """(name, duration) slices per track name, and each track's parent's name; checks nesting
    and time order on the way."""
    tracks, events = decode(data)
    slices, balanced = replay(events)
    assert balanced, "BEGIN/END pairs must nest per track and timestamps must not go back"
    assert [p.timestamp for p in events] == sorted(p.timestamp for p in events)
    names = {uuid: track_name(d) for uuid, d in tracks.items()}
    parents = {names[uuid]: names.get(d.parent_uuid, "") for uuid, d in tracks.items()}
    by_name: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for uuid, per_track in slices.items():
        by_name[names[uuid]].extend(per_track)
    return by_name, parents


def test_export_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.conftest import _load_sample

    trace = _load_sample("tiny_kernels")
    report = analyze(trace, only=["overview", "gaps", "steps", "bound"])
    target = tmp_path / "annotated.pftrace"
    code = main(["export", str(sample_path("tiny_kernels")), "-o", str(target)])
    out, _ = capsys.readouterr()
    assert code == 0 and out.strip() == f"Wrote {target}"
    by_name, parents = slices_by_track(target.read_bytes())
    # Every GPU event is a slice on its stream's track, with its own duration.
    gpu = trace.events.filter(pl.col("kind").cast(pl.String).is_in(list(GPU_KINDS)) & pl.col("device").is_not_null())
    assert gpu.height > 0
    for (stream,), part in gpu.group_by("stream"):
        want = Counter((str(n), int(d)) for n, d in part.select(pl.col("name").cast(pl.String), "dur_ns").iter_rows())
        own = re.compile(rf"stream {stream}( annotations)?( \(overlap \d+\))?")
        got = Counter(s for name, per_track in by_name.items() if own.fullmatch(name) for s in per_track)
        assert got == want
        assert parents[f"stream {stream}"].startswith("GPU ")
    # The analysis tracks hold what the analyses found, one slice each.
    gaps_result = report.section("gaps", GapsResult)
    steps_result = report.section("steps", StepsResult)
    bound_result = report.section("bound", BoundResult)
    assert gaps_result is not None and steps_result is not None and bound_result is not None
    gaps, steps = gaps_result.gaps, steps_result.steps
    regions = bound_result.regions.filter(pl.col("kind") == "step")
    assert gaps.height > 0 and steps.height > 0 and regions.height > 0
    idle = [s for name, per_track in by_name.items() if name.startswith("idle gaps GPU ") for s in per_track]
    assert Counter(name for name, _ in idle) == Counter(f"idle: {cause}" for cause in gaps["cause"].to_list())
    assert sorted(d for _, d in idle) == sorted((gaps["end_ns"] - gaps["start_ns"]).to_list())
    assert sorted(by_name["steps (device)"]) == sorted(
        (f"step {n}", e - s) for n, s, e in steps.select("step", "device_start_ns", "device_end_ns").iter_rows()
    )
    assert len(by_name["bound regions (step)"]) == regions.height
    assert {parents[n] for n in ("steps (device)", "bound regions (step)")} == {"traceinsight"}
    assert main(["export", str(sample_path("tiny_kernels")), "-o", str(target)]) == 2
    assert main(["export", str(sample_path("tiny_kernels")), "-o", str(target), "--force", "--no-analysis"]) == 0
    bare, _ = slices_by_track(target.read_bytes())
    assert "traceinsight" not in bare and "steps (device)" not in bare
    assert {n: sorted(s) for n, s in bare.items()} == {n: sorted(s) for n, s in by_name.items() if parents.get(n) != "traceinsight" and s}


def test_sql_polars_engine(capsys: pytest.CaptureFixture[str]) -> None:
    query = "SELECT count(*) AS n, sum(dur_ns) AS total_ns FROM kernels WHERE kind = 'kernel'"
    code = main(["sql", str(sample_path("gemm_bf16")), query, "--format", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    assert (data["kind"], data["sections"], data["options"]["query"]) == ("sql", ["rows"], query)
    rows = data["rows"]
    from tests.conftest import _load_sample

    kernels = _load_sample("gemm_bf16").kernels.filter(pl.col("kind") == "kernel")
    assert rows == [{"n": kernels.height, "total_ns": int(kernels["dur_ns"].sum())}]
    code = main(["sql", str(sample_path("gemm_bf16")), "SELECT nope FROM kernels"])
    _, err = capsys.readouterr()
    assert code == 1 and "SQL error" in err  # a data error, not a usage error


def test_sql_perfetto_engine_explains_the_missing_binary(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEINSIGHT_TRACE_PROCESSOR", raising=False)
    code = main(["sql", str(sample_path("gemm_bf16")), "select 1", "--engine", "perfetto"])
    _, err = capsys.readouterr()
    assert code == 2 and "--trace-processor" in err and "TRACEINSIGHT_TRACE_PROCESSOR" in err


def test_sql_perfetto_engine_uses_the_given_binary(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import pandas as pd
    import perfetto.trace_processor as tp_module

    binary = tmp_path / "trace_processor"
    binary.write_text("#!/bin/sh\n")
    seen: dict[str, Any] = {}

    class FakeTP:
        def __init__(self, trace: str, config: Any) -> None:
            seen["trace"], seen["bin"] = trace, config.bin_path

        def query(self, sql: str) -> Any:
            seen["sql"] = sql

            class Rows:
                def as_pandas_dataframe(self) -> pd.DataFrame:
                    return pd.DataFrame({"cnt": [3]})

            return Rows()

        def close(self) -> None:
            seen["closed"] = True

    monkeypatch.setattr(tp_module, "TraceProcessor", FakeTP)
    monkeypatch.setenv("TRACEINSIGHT_TRACE_PROCESSOR", str(binary))
    code = main(["sql", str(sample_path("gemm_bf16")), "select count(*) as cnt from slice", "--engine", "perfetto", "-f", "csv"])
    out, _ = capsys.readouterr()
    assert code == 0 and out.splitlines() == ["cnt", "3"]
    assert seen == {"trace": str(sample_path("gemm_bf16")), "bin": str(binary), "sql": "select count(*) as cnt from slice", "closed": True}
