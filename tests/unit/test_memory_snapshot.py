"""Allocator snapshots: loading (safely), and each answer against hand-made snapshots with known truth."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.snapshot_builder import MiB, SnapshotBuilder, stack
from traceinsight.analysis.snapshot.report import SnapshotReport, analyze_snapshot
from traceinsight.analysis.snapshot.sites import BEFORE_TRACE
from traceinsight.errors import TraceFormatError
from traceinsight.trace.snapshot.load import load_memory_snapshot

TRAIN = "/home/user/train.py"
MODEL = "/home/user/model.py"
LEAK_SITE = f"{TRAIN}:30 (train_step)"
ACT_SITE = f"{MODEL}:12 (block)"


def leaky(steps: int = 6) -> SnapshotBuilder:
    """Each step: a 4 MiB activation (freed) and 1 MiB kept in a list (the leak)."""
    b = SnapshotBuilder()
    b.segment(max(64, steps + 8) * MiB)
    for _ in range(steps):
        act = b.alloc(4 * MiB, stack(MODEL, 12, "block", forward=True))
        b.alloc(1 * MiB, stack(TRAIN, 30, "train_step"))
        b.free(act)
    return b


def report(
    tmp_path: Path, b: SnapshotBuilder, *, protocol: int = 4, name: str = "s.pickle", **kw: Any
) -> SnapshotReport:
    return analyze_snapshot(load_memory_snapshot(b.dump(tmp_path / name, protocol=protocol)), **kw)


def sites_of(frame: pl.DataFrame | None) -> list[tuple[str, int, int]]:
    assert frame is not None
    return list(
        zip(
            frame["site"].to_list(), frame["bytes"].to_list(), frame["count"].to_list(), strict=True
        )
    )


@pytest.mark.parametrize("protocol", [4, 5])
def test_load_frames_and_interned_stacks(tmp_path: Path, protocol: int) -> None:
    snap = load_memory_snapshot(leaky(3).dump(tmp_path / "s.pickle", protocol=protocol))
    assert snap.layout == "current"
    # segment_alloc, then per step: alloc, alloc, free_requested, free_completed
    assert snap.events.height == 1 + 3 * 4
    assert snap.events["action"].to_list()[:5] == [
        "segment_alloc",
        "alloc",
        "alloc",
        "free_requested",
        "free_completed",
    ]
    assert snap.events["idx"].to_list() == list(range(13))
    # two distinct stacks, each stored once, however many events use them
    assert snap.frames["stack_id"].n_unique() == 2
    assert snap.frames.height == 6 + 5
    assert snap.events.filter(pl.col("action") == "alloc")["stack_id"].to_list() == [0, 1] * 3
    assert snap.stack(1)[2] == (TRAIN, 30, "train_step")
    assert snap.segments["total_size_bytes"].to_list() == [64 * MiB]
    # blocks tile the segment: the 3 kept MiB, the freed 4 MiB holes between them, the tail
    assert snap.blocks["size_bytes"].sum() == 64 * MiB
    assert snap.blocks.filter(pl.col("state") == "active_allocated")["size_bytes"].sum() == 3 * MiB


def test_peak_allocated_when_and_what(tmp_path: Path) -> None:
    r = report(tmp_path, leaky(6))
    # the peak is during the last step: 5 kept MiB + the 4 MiB activation + the 6th MiB
    assert r.peak.peak_allocated_bytes == 10 * MiB
    assert r.peak.peak_idx == 1 + 5 * 4 + 1
    assert r.peak.peak_time_us == 1_000_000 + 10 * (r.peak.peak_idx + 1)
    assert r.peak.peak_reserved_bytes == 64 * MiB
    assert r.peak.end_allocated_bytes == 6 * MiB
    assert sites_of(r.peak.sites) == [(LEAK_SITE, 6 * MiB, 6), (ACT_SITE, 4 * MiB, 1)]
    assert r.peak.sites is not None
    assert r.peak.sites["in_forward"].to_list() == [False, True]


def test_leak_found_with_growth_per_iteration(tmp_path: Path) -> None:
    r = report(tmp_path, leaky(6))
    assert r.leaks.available
    # six steps, each starting at an activation: five whole iterations before the last start
    assert r.leaks.iterations == 5
    assert r.leaks.method.startswith(
        f"5 whole iterations, each starting at an allocation at {ACT_SITE} "
    )
    assert r.leaks.leaks is not None
    assert r.leaks.leaks["site"].to_list() == [LEAK_SITE]  # the freed activation does not leak
    row = r.leaks.leaks.row(0, named=True)
    assert row["growth_per_iteration_bytes"] == 1 * MiB
    assert row["first_bytes"] == 1 * MiB and row["last_bytes"] == 5 * MiB
    assert row["live_bytes"] == [k * MiB for k in range(1, 6)]


def test_leak_with_equal_slices_when_asked(tmp_path: Path) -> None:
    r = report(tmp_path, leaky(6), iterations=3)
    assert r.leaks.iterations == 3
    assert "equal slices of time" in r.leaks.method
    assert r.leaks.leaks is not None
    assert r.leaks.leaks["site"].to_list() == [LEAK_SITE]


def test_no_leak_when_memory_is_steady(tmp_path: Path) -> None:
    b = SnapshotBuilder()
    b.segment(64 * MiB)
    for _ in range(5):
        a = b.alloc(4 * MiB, stack(MODEL, 12, "block", forward=True))
        c = b.alloc(2 * MiB, stack(TRAIN, 31, "loss"))
        b.free(a)
        b.free(c)
    r = report(tmp_path, b)
    assert r.leaks.available and r.leaks.iterations == 4
    assert r.leaks.leaks is not None and r.leaks.leaks.is_empty()


def fragmented() -> SnapshotBuilder:
    """Three 20 MiB segments, each holding 12 MiB of kept tensors and an 8 MiB free tail, and
    one 40 MiB segment with 4 MiB tensors of which every other one was freed (holes)."""
    b = SnapshotBuilder()
    for _ in range(3):
        b.segment(20 * MiB)
        kept = b.alloc(12 * MiB, stack(TRAIN, 40, "load_weights"))
        tail = b.alloc(8 * MiB, stack(TRAIN, 41, "scratch"))
        b.free(tail)
        del kept
    b.segment(40 * MiB)
    addrs = [b.alloc(4 * MiB, stack(TRAIN, 50, "bucket")) for _ in range(10)]
    for addr in addrs[::2]:
        b.free(addr)
    return b


def test_fragmentation_planted(tmp_path: Path) -> None:
    r = report(tmp_path, fragmented())
    f = r.fragmentation
    assert f.segments == 4
    assert f.reserved_bytes == 100 * MiB
    assert f.allocated_bytes == 36 * MiB + 20 * MiB
    assert f.reserved_free_bytes == 44 * MiB
    assert f.inactive_blocks == 3 + 5
    assert f.inactive_bytes == 3 * 8 * MiB + 5 * 4 * MiB
    assert f.largest_inactive_bytes == 8 * MiB
    assert f.largest_request_bytes == 12 * MiB
    assert (f.inactive_tails, f.inactive_tail_bytes) == (3, 24 * MiB)
    # Whether expandable segments would help is the allocator replay's answer, not the free
    # tails': this hand-made layout is not one the allocator would make (a 12 MiB request gets
    # a 12 MiB segment of its own), so it is checked on real runs in test_memory_allocator.py.
    assert not f.expandable
    assert f.advice == r.allocator.advice


def test_fragmentation_not_blamed_on_expandable_segments_when_already_on(tmp_path: Path) -> None:
    b = fragmented()
    path = b.dump(tmp_path / "s.pickle", settings={"expandable_segments": True})
    f = analyze_snapshot(load_memory_snapshot(path)).fragmentation
    assert f.expandable and not f.expandable_would_help


def test_oom_explained_with_expandable_segments_first(tmp_path: Path) -> None:
    b = fragmented()
    # 30 MiB asked, 6 MiB free on the device: 44 MiB reserved but free would cover it
    b.oom(30 * MiB, 6 * MiB)
    o = report(tmp_path, b).oom
    assert o.available and o.ooms == 1
    assert (o.request_bytes, o.device_free_bytes, o.shortfall_bytes) == (
        30 * MiB,
        6 * MiB,
        24 * MiB,
    )
    assert (o.allocated_bytes, o.reserved_bytes) == (56 * MiB, 100 * MiB)
    assert sites_of(o.sites)[0] == (f"{TRAIN}:40 (load_weights)", 36 * MiB, 3)
    # every allocation runs under a forward (the builder's stacks) and none outlives an
    # iteration: activations; the largest activation site is the one to checkpoint
    assert [fix.kind for fix in o.fixes] == [
        "expandable_segments",
        "checkpointing",
        "smaller_batch",
    ]
    assert o.fixes[1].frees_bytes == 36 * MiB and "load_weights" in o.fixes[1].text
    assert o.fix is not None and o.fix.kind == "expandable_segments"
    # the batch must shrink so that 56 MiB loses 24 MiB: 32/56
    assert "batch × 0.57 or smaller" in o.fixes[-1].text


def test_fragmentation_at_the_oom_rebuilt_when_teardown_follows(tmp_path: Path) -> None:
    """The program frees everything and empties the cache after the error, before the dump:
    the layout at the error is rebuilt from the trace."""
    b = fragmented()
    b.oom(20 * MiB, 6 * MiB)
    for seg in b.segments:
        for addr in list(seg.live):
            b.free(addr)
    while b.segments:
        b.release(0)
    r = report(tmp_path, b)
    assert r.peak.end_allocated_bytes == 0 and r.peak.end_reserved_bytes == 0
    f = r.fragmentation
    assert f.moment == "at the out-of-memory error (event #36)"
    assert (f.segments, f.reserved_bytes, f.allocated_bytes) == (4, 100 * MiB, 56 * MiB)
    assert (f.inactive_blocks, f.inactive_bytes, f.largest_inactive_bytes) == (8, 44 * MiB, 8 * MiB)
    assert (f.inactive_tails, f.inactive_tail_bytes, f.largest_request_bytes) == (
        3,
        24 * MiB,
        20 * MiB,
    )
    # The hand-made layout is not one the allocator would make: the replay does not run out
    # where the trace did, so no setting is predicted (the OOM's own reading still is).
    assert not f.expandable_would_help and f.advice.startswith("no prediction")
    assert r.oom.fix is not None and r.oom.fix.kind == "expandable_segments"


def test_oom_checkpointing_when_forward_activations_hold_it(tmp_path: Path) -> None:
    b = SnapshotBuilder()
    b.segment(100 * MiB)
    b.alloc(10 * MiB, stack(TRAIN, 10, "build_model"))
    for layer in range(8):
        b.alloc(10 * MiB, stack(MODEL, 30 + layer % 2, "block", forward=True))
    b.oom(20 * MiB, 2 * MiB)
    o = report(tmp_path, b).oom
    assert o.shortfall_bytes == 18 * MiB
    assert (o.allocated_bytes, o.reserved_bytes) == (90 * MiB, 100 * MiB)
    kinds = [fix.kind for fix in o.fixes]
    # 10 MiB reserved but free does not cover 20 MiB; the two block sites alternate: the leak analysis reads each pair as an iteration, so the
    # blocks of earlier "iterations" are kept (30 MiB at line 30, covering the 18 MiB short);
    # the last one's activations (10 MiB a site) do not cover it on their own
    assert kinds == ["free_kept", "checkpointing", "smaller_batch"]
    assert [f.covers for f in o.fixes] == [True, False, True]
    assert o.fixes[0].frees_bytes == 30 * MiB
    assert o.fixes[1].frees_bytes == 10 * MiB
    assert o.fix is not None and f"{MODEL}:30 (block)" in o.fix.text


def test_no_oom_says_so(tmp_path: Path) -> None:
    o = report(tmp_path, leaky(3)).oom
    assert not o.available and o.reason == "no out-of-memory event in the trace"


def test_trace_that_starts_with_memory_held(tmp_path: Path) -> None:
    """A ring buffer that lost the early events: frees of unseen allocations and blocks active
    without an alloc form the starting level."""
    b = SnapshotBuilder()
    b.segment(64 * MiB, record=False)
    early = b.alloc(8 * MiB, stack(TRAIN, 5, "setup"), record=False)
    b.alloc(16 * MiB, stack(TRAIN, 6, "weights"), record=False)
    b.alloc(2 * MiB, stack(TRAIN, 7, "step"))
    b.free(early)
    r = report(tmp_path, b)
    assert r.peak.peak_allocated_bytes == 26 * MiB
    assert r.peak.peak_idx == 0
    assert sites_of(r.peak.sites) == [
        (f"{TRAIN}:6 (weights)", 16 * MiB, 1),
        (BEFORE_TRACE, 8 * MiB, 1),
        (f"{TRAIN}:7 (step)", 2 * MiB, 1),
    ]
    assert r.peak.peak_reserved_bytes == 64 * MiB


def test_older_layout_is_a_list_of_segments(tmp_path: Path) -> None:
    b = leaky(2)
    segments = b.snapshot_dict()["segments"]
    for seg in segments:
        for block in seg["blocks"]:
            del block["address"]  # older snapshots did not write it
    path = tmp_path / "old.pickle"
    path.write_bytes(pickle.dumps(segments, protocol=4))
    snap = load_memory_snapshot(path)
    assert snap.layout == "segments-only" and snap.events.is_empty()
    assert snap.blocks["address"].to_list()[:2] == [
        segments[0]["address"],
        segments[0]["address"] + 4 * MiB,
    ]
    r = analyze_snapshot(snap)
    assert r.peak.peak_idx is None
    assert r.peak.peak_allocated_bytes == 2 * MiB
    assert sites_of(r.peak.sites) == [(LEAK_SITE, 2 * MiB, 2)]
    assert not r.leaks.available and not r.oom.available


def test_empty_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "empty.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=5))
    r = analyze_snapshot(load_memory_snapshot(path))
    assert r.peak.peak_allocated_bytes == 0 and r.events == 0
    assert not r.fragmentation.available and not r.leaks.available and not r.oom.available
    assert r.to_dict()["peak"]["sites"] == []


class RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [4, 5])
def test_pickle_that_runs_code_is_refused(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pickle"
    path.write_bytes(
        pickle.dumps({"segments": [], "device_traces": [[RunsCode(marker)]]}, protocol=protocol)
    )
    with pytest.raises(TraceFormatError) as err:
        load_memory_snapshot(path)
    message = str(err.value)
    assert message.startswith(f"{path}: not a memory snapshot: it asks to load ")
    assert "system" in message and "refused" in message and "\n" not in message
    assert not marker.exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "file is empty"),
        (b'{"traceEvents": []}', "a profiler trace (JSON), not a memory snapshot pickle"),
        (pickle.dumps({"segments": [], "device_traces": []})[:-5], "not a readable pickle"),
        (
            pickle.dumps({"traceEvents": []}),
            "not a memory snapshot: the pickle holds a dict with keys traceEvents",
        ),
        (pickle.dumps(42), "not a memory snapshot: the pickle holds a int"),
        (
            pickle.dumps({"segments": [{"device": 0}], "device_traces": []}),
            "not a memory snapshot: KeyError",
        ),
    ],
)
def test_bad_files_one_line_naming_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as err:
        load_memory_snapshot(path)
    assert str(err.value).startswith(f"{path}: {reason}")
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="no such file"):
        load_memory_snapshot(tmp_path / "nope.pickle")


def test_compare_two_snapshots(tmp_path: Path) -> None:
    before = load_memory_snapshot(leaky(6).dump(tmp_path / "a.pickle"))
    after = load_memory_snapshot(leaky(3).dump(tmp_path / "b.pickle"))
    c = analyze_snapshot(before, compare_with=after).compare
    assert c is not None
    assert c.peak_change_bytes == (7 - 10) * MiB
    assert c.sites is not None
    assert c.sites.rows() == [(LEAK_SITE, 6 * MiB, 3 * MiB, -3 * MiB)]


def test_timeline_points_keep_the_peak(tmp_path: Path) -> None:
    r = analyze_snapshot(load_memory_snapshot(leaky(6).dump(tmp_path / "s.pickle")), points=5)
    t = r.timeline
    assert t is not None
    assert t.points.height == 5
    assert t.points["allocated_bytes"].max() == r.peak.peak_allocated_bytes
    # each point's stacked sites add up to the allocated level there
    stacked = t.series.group_by("idx").agg(pl.col("live_bytes").sum()).sort("idx")
    assert stacked["live_bytes"].to_list() == t.points.sort("idx")["allocated_bytes"].to_list()


def test_site_is_the_first_user_frame(tmp_path: Path) -> None:
    from traceinsight.analysis.snapshot.sites import sites

    snap = load_memory_snapshot(leaky(1).dump(tmp_path / "s.pickle"))
    table = sites(snap)
    assert table.rows() == [(0, ACT_SITE, 2, True), (1, LEAK_SITE, 2, False)]


def test_many_iterations_compared_at_evenly_spread_ends(tmp_path: Path) -> None:
    r = report(tmp_path, leaky(250))
    assert (r.leaks.iterations, r.leaks.compared) == (249, 100)
    assert r.leaks.leaks is not None
    row = r.leaks.leaks.row(0, named=True)
    # growth per iteration stays per iteration, not per compared end
    assert (
        row["site"],
        row["growth_per_iteration_bytes"],
        row["first_bytes"],
        row["last_bytes"],
    ) == (LEAK_SITE, 1 * MiB, 1 * MiB, 249 * MiB)


def test_snapshot_without_times(tmp_path: Path) -> None:
    """Older snapshots have no time_us: event order stands in for time."""
    b = SnapshotBuilder(times=False)
    b.segment(64 * MiB)
    for _ in range(6):
        b.alloc(1 * MiB, stack(TRAIN, 30, "train_step"))
    snap = load_memory_snapshot(b.dump(tmp_path / "s.pickle"))
    assert snap.events["time_us"].null_count() == snap.events.height
    r = analyze_snapshot(snap, iterations=3)
    assert (
        r.peak.peak_allocated_bytes == 6 * MiB
        and r.peak.peak_time_us is None
        and r.first_time_us is None
    )
    assert r.leaks.method == "3 equal slices of event order"
    assert r.leaks.leaks is not None and r.leaks.leaks["site"].to_list() == [LEAK_SITE]


def test_the_device_with_the_events_is_explained(tmp_path: Path) -> None:
    b = leaky(3)
    b.device = 1
    data = b.snapshot_dict()
    assert data["device_traces"][0] == [] and len(data["device_traces"][1]) == 13
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(data, protocol=5))
    r = analyze_snapshot(load_memory_snapshot(path))
    assert (r.device, r.devices, r.events) == (1, (1,), 13)
    assert r.peak.peak_allocated_bytes == 7 * MiB
