"""Loading a snapshot while it is read: the device traces go into columns every few kilobytes
here (``drain_every``), and the unpickler forgets the events moved out. Whatever the pickle,
the frames are those of the plain load (``drain_every=0``); when the pickle refers again to an
object that was let go, the file is read a second time, the plain way."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import pytest

import traceinsight.trace.snapshot.load as load_module
from tests import snapshot_samples
from tests.snapshot_builder import MiB, SnapshotBuilder, stack
from traceinsight.errors import TraceFormatError
from traceinsight.trace.snapshot.load import load_memory_snapshot
from traceinsight.trace.snapshot.model import MemorySnapshot

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_traces" / "memory").rglob("*.pickle"))
TINY = 4096
FRAMES = [{"filename": f"/home/user/f{i}.py", "line": i, "name": f"fn{i}"} for i in range(40)]


class Reads:
    """Which reads of the file were made: with a drain (streamed) or without (plain)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kinds: list[str] = []
        self.forgotten = 0
        real_read = load_module.read_pickle
        real_drain = load_module._TraceDrain.__call__

        def read_pickle(path: Any, **kw: Any) -> Any:
            self.kinds.append("streamed" if kw.get("drain") else "plain")
            return real_read(path, **kw)

        def drain(drainer: Any, memo: dict[int, Any]) -> set[int]:
            forgotten = real_drain(drainer, memo)
            self.forgotten += len(forgotten)
            return forgotten

        monkeypatch.setattr(load_module, "read_pickle", read_pickle)
        monkeypatch.setattr(load_module._TraceDrain, "__call__", drain)


def assert_same(a: MemorySnapshot, b: MemorySnapshot) -> None:
    assert (a.layout, a.file_bytes, a.allocator_settings) == (
        b.layout,
        b.file_bytes,
        b.allocator_settings,
    )
    for name in ("segments", "blocks", "events", "frames"):
        left, right = getattr(a, name), getattr(b, name)
        assert left.schema == right.schema, name
        assert left.equals(right), name


def streamed_and_plain(path: Path) -> tuple[MemorySnapshot, MemorySnapshot]:
    return load_memory_snapshot(path, drain_every=TINY), load_memory_snapshot(path, drain_every=0)


def event(i: int, frames: list[dict[str, Any]], action: str = "alloc") -> dict[str, Any]:
    return {
        "action": action,
        "addr": 0x7F00_0000_0000 + i * 512,
        "size": 512 + i,
        "stream": 0,
        "time_us": 1_000_000 + i,
        "compile_context": "N/A" + " " * (i % 2),  # a new string per event, as PyTorch's are
        "frames": frames,
    }


def snapshot(traces: list[list[dict[str, Any]]], **extra: Any) -> dict[str, Any]:
    segment = {
        "device": 0,
        "address": 0x7E00_0000_0000,
        "total_size": 2 * MiB,
        "allocated_size": 0,
        "active_size": 0,
        "requested_size": 0,
        "stream": 0,
        "segment_type": "large",
        "is_expandable": False,
        "frames": traces[0][0]["frames"] if traces and traces[0] else [],
        "blocks": [{"address": 0x7E00_0000_0000, "size": 2 * MiB, "state": "inactive"}],
    }
    data: dict[str, Any] = {"segments": [segment], "device_traces": traces}
    data["allocator_settings"] = {"expandable_segments": False}
    data.update(extra)
    return data


def pairs(n: int) -> list[dict[str, Any]]:
    """Allocations, each freed right away by two events that share one frames list (with the
    shared frame dicts in it), as PyTorch writes a free."""
    events = []
    for i in range(n):
        events.append(event(3 * i, [FRAMES[i % 40], FRAMES[(i * 7) % 40], FRAMES[39]]))
        shared = [FRAMES[(i * 3) % 40], FRAMES[(i * 5) % 40]]
        events.append(event(3 * i + 1, shared, "free_requested"))
        events.append(event(3 * i + 2, shared, "free_completed"))
    return events


def dump(tmp_path: Path, data: Any, protocol: int, name: str = "s.pickle") -> Path:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    return path


def handmade() -> dict[str, SnapshotBuilder]:
    leaky = SnapshotBuilder()
    leaky.segment(8192 * MiB)
    for _ in range(1500):
        act = leaky.alloc(4 * MiB, stack("/home/user/model.py", 12, "block", forward=True))
        leaky.alloc(1 * MiB, stack("/home/user/train.py", 30, "train_step"))
        leaky.free(act)
    untimed = SnapshotBuilder(times=False, device=2)
    untimed.segment(64 * MiB)
    for i in range(200):
        untimed.free(untimed.alloc(MiB, stack("/home/user/data.py", i % 7, "load")))
    released = SnapshotBuilder()
    seg = released.segment(64 * MiB)
    for _ in range(100):
        released.free(released.alloc(MiB, stack("/home/user/a.py", 1, "f")))
    released.release(seg)
    released.segment(32 * MiB)
    released.oom(64 * MiB, 16 * MiB)
    return {
        "sample": snapshot_samples.build(),
        "leaky": leaky,
        "untimed": untimed,
        "released": released,
    }


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_every_sample_pickle_loads_the_same_streamed(tmp_path: Path, protocol: int) -> None:
    assert SAMPLES
    for sample in SAMPLES:
        # as it is, and written again at each protocol (protocol 2 has no frames: many reads)
        for path in (sample, dump(tmp_path, pickle.loads(sample.read_bytes()), protocol)):
            streamed, plain = streamed_and_plain(path)
            assert plain.events.height > 0
            assert_same(streamed, plain)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_hand_made_snapshots_load_the_same_streamed(
    tmp_path: Path, protocol: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    for name, builder in handmade().items():
        path = builder.dump(tmp_path / f"{name}.pickle", protocol=protocol)
        streamed, plain = streamed_and_plain(path)
        assert_same(streamed, plain)
    # each streamed once, with events let go on the way, and never read again
    assert reads.kinds == ["streamed", "plain"] * 4
    assert reads.forgotten > 1000


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_frames_list_shared_across_a_drain_boundary(
    tmp_path: Path, protocol: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = pairs(3000)
    # and lists shared by events a few apart, as the neighbours' pickles have them
    for i in range(0, len(events) - 10, 97):
        events[i + 10]["frames"] = events[i]["frames"]
    path = dump(tmp_path, snapshot([events]), protocol)
    reads = Reads(monkeypatch)
    streamed = load_memory_snapshot(path, drain_every=TINY)
    assert reads.kinds == ["streamed"]  # every shared list was still in the memo when wanted
    assert reads.forgotten > 3000
    plain = load_memory_snapshot(path, drain_every=0)
    assert_same(streamed, plain)
    assert streamed.events.height == 9000
    assert streamed.events["idx"].to_list() == list(range(9000))
    # events that share a frames list share a stack
    by_list: dict[int, set[int]] = {}
    for e, stack_id in zip(events, streamed.events["stack_id"].to_list(), strict=True):
        by_list.setdefault(id(e["frames"]), set()).add(stack_id)
    assert all(len(ids) == 1 for ids in by_list.values())
    assert len(by_list) < 7000


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize(
    "where",
    ["same trace", "frames of a later event", "another device", "allocator settings"],
)
def test_an_object_let_go_and_referred_to_again_reads_the_file_again(
    tmp_path: Path, protocol: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = pairs(3000)
    early = events[5]
    traces = [events]
    extra: dict[str, Any] = {}
    if where == "same trace":
        events.append(early)  # the same dict, at the end of the trace: a memo get
    elif where == "frames of a later event":
        events[-1]["frames"] = events[3]["frames"]
    elif where == "another device":
        traces.append([dict(event(1, []), action="segment_alloc"), early])
    else:
        extra["allocator_settings"] = {"expandable_segments": False, "first": early}
    path = dump(tmp_path, snapshot(traces, **extra), protocol)
    reads = Reads(monkeypatch)
    streamed = load_memory_snapshot(path, drain_every=TINY)
    assert reads.kinds == ["streamed", "plain"]
    plain = load_memory_snapshot(path, drain_every=0)
    assert_same(streamed, plain)
    if where == "same trace":
        assert streamed.events.row(-1, named=True)["addr"] == early["addr"]


def test_segments_only_layout_streamed(tmp_path: Path) -> None:
    b = handmade()["leaky"]
    path = dump(tmp_path, b.snapshot_dict()["segments"] * 50, 4)
    streamed, plain = streamed_and_plain(path)
    assert streamed.layout == "segments-only"
    assert_same(streamed, plain)


def test_several_devices_in_order(tmp_path: Path) -> None:
    traces = [pairs(500), [], pairs(700), pairs(10)]
    path = dump(tmp_path, snapshot(traces), 5)
    streamed, plain = streamed_and_plain(path)
    assert_same(streamed, plain)
    counts = streamed.events.group_by("device", maintain_order=True).len().rows()
    assert counts == [(0, 1500), (2, 2100), (3, 30)]


def test_code_after_many_events_is_still_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class RunsCode:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    events: list[Any] = pairs(3000)
    events.append(RunsCode())
    path = dump(tmp_path, snapshot([events]), 4)
    with pytest.raises(TraceFormatError, match="refused") as err:
        load_memory_snapshot(path, drain_every=TINY)
    assert "\n" not in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize("cut", [0.3, 0.9])
def test_truncated_after_drains_says_so_as_the_plain_load(tmp_path: Path, cut: float) -> None:
    raw = pickle.dumps(snapshot([pairs(3000)]), protocol=4)
    path = tmp_path / "cut.pickle"
    path.write_bytes(raw[: int(len(raw) * cut)])
    messages = []
    for every in (TINY, 0):
        with pytest.raises(TraceFormatError) as err:
            load_memory_snapshot(path, drain_every=every)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "not a readable pickle" in messages[0]


@pytest.mark.parametrize("k", [487, 1497, 3987])
def test_an_event_got_again_where_the_memo_holds_a_filler(
    tmp_path: Path, k: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With 4 KB reads of protocol 2, these events' memo slots hold the object that keeps the
    # rebuilt memo table small: the pickle's second reference to them gets that object, without
    # any error from the unpickler, and the load must still notice and read the file again.
    events = pairs(3000)
    path = dump(tmp_path, snapshot([events], allocator_settings={"x": events[k]}), 2)
    reads = Reads(monkeypatch)
    streamed = load_memory_snapshot(path, drain_every=TINY)
    assert reads.kinds == ["streamed", "plain"]
    assert streamed.allocator_settings["x"] == events[k]
    assert_same(streamed, load_memory_snapshot(path, drain_every=0))
