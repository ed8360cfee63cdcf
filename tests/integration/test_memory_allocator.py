"""The caching allocator replay, checked on real snapshots recorded on an H200 and on runs of
the same program measured under other settings (sample_traces/memory/alloc/measured.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traceinsight.analysis.snapshot.allocator import (
    AllocatorSettings,
    Simulator,
    allocation_size,
    round_size,
)
from traceinsight.analysis.snapshot.report import analyze_snapshot
from traceinsight.trace.snapshot.load import load_memory_snapshot

MiB = 1 << 20
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces" / "memory"
RECORDED = sorted(p for d in ("h200", "captured", "alloc") for p in (SAMPLES / d).glob("*.pickle*"))
LM = SAMPLES / "alloc" / "lm_default.pickle.gz"
MEASURED = json.loads((SAMPLES / "alloc" / "measured.json").read_text())["runs"]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_replay_reproduces_the_recorded_reserved_memory(path: Path) -> None:
    w = analyze_snapshot(load_memory_snapshot(path)).allocator
    assert w.available
    assert w.recorded_peak_reserved_bytes > 0
    assert abs(w.replay_error) <= 0.05, (
        w.replayed_peak_reserved_bytes,
        w.recorded_peak_reserved_bytes,
    )


def test_predictions_match_the_runs_measured_under_each_setting() -> None:
    w = analyze_snapshot(load_memory_snapshot(LM)).allocator
    assert w.runs is not None
    rows = {r["settings"]: r for r in w.runs.iter_rows(named=True)}
    for label, conf in [
        ("recorded: (defaults)", ""),
        ("expandable_segments:True", "expandable_segments:True"),
        ("max_split_size_mb:64", "max_split_size_mb:64"),
    ]:
        measured = MEASURED[conf]
        predicted = rows[label]
        assert predicted["peak_reserved_bytes"] == pytest.approx(
            measured["max_memory_reserved_bytes"], rel=0.10
        ), label
        assert predicted["cudamalloc_calls"] == pytest.approx(
            measured["segments_allocated"], rel=0.10, abs=1
        ), label


def test_advice_is_the_setting_that_saved_most_on_the_real_run() -> None:
    r = analyze_snapshot(load_memory_snapshot(LM))
    measured_saving = (
        MEASURED[""]["max_memory_reserved_bytes"]
        - MEASURED["expandable_segments:True"]["max_memory_reserved_bytes"]
    )
    assert r.allocator.best_settings == "expandable_segments:True"
    assert r.allocator.best_saving_bytes == pytest.approx(measured_saving, rel=0.10)
    assert r.fragmentation.expandable_would_help
    assert "expandable_segments:True" in r.fragmentation.advice


def test_rounding_and_segment_sizes() -> None:
    assert [round_size(n) for n in (1, 512, 513, 1_000_000)] == [512, 512, 1024, 1_000_448]
    assert allocation_size(MiB) == 2 * MiB  # small pool
    assert allocation_size(MiB + 512) == 20 * MiB  # 1 to 10 MiB: a 20 MiB segment
    assert allocation_size(10 * MiB) == 10 * MiB
    assert allocation_size(11 * MiB) == 12 * MiB  # above: rounded up to 2 MiB


def test_split_rules() -> None:
    sim = Simulator(AllocatorSettings())
    a = sim.malloc(3 * MiB, 0)  # a 20 MiB segment, split: 17 MiB left over 1 MiB
    b = sim.malloc(16 * MiB + 512 * 1024, 0)  # fits the 17 MiB rest; 0.5 MiB left: not split
    assert a is not None and b is not None
    assert (a.size, b.size) == (3 * MiB, 17 * MiB)
    assert sim.reserved == 20 * MiB and sim.segment_allocs == 1
    small = sim.malloc(1000, 0)
    assert small is not None and small.size == 1024 and sim.reserved == 22 * MiB


def test_max_split_size_keeps_oversize_blocks_whole() -> None:
    sim = Simulator(AllocatorSettings(max_split_bytes=64 * MiB))
    big = sim.malloc(100 * MiB, 0)
    assert big is not None
    sim.free(big)
    # A 30 MiB request may not take the free 100 MiB block (oversize, never split): new segment.
    assert sim.malloc(30 * MiB, 0) is not None and sim.segment_allocs == 2
    # An 90 MiB one may (within 20 MiB of it), whole.
    again = sim.malloc(90 * MiB, 0)
    assert again is not None and again.size == 100 * MiB and sim.segment_allocs == 2


def test_expandable_segment_grows_in_pages() -> None:
    sim = Simulator(AllocatorSettings(expandable_segments=True))
    a = sim.malloc(3 * MiB, 0)
    b = sim.malloc(25 * MiB, 0)
    assert a is not None and b is not None
    assert sim.reserved == 40 * MiB and sim.segment_allocs == 0 and sim.segment_maps == 2


def test_compressed_snapshots_read_as_the_plain_one(tmp_path: Path) -> None:
    import gzip

    plain = tmp_path / "lm.pickle"
    plain.write_bytes(gzip.decompress(LM.read_bytes()))
    a, b = load_memory_snapshot(LM), load_memory_snapshot(plain)
    assert a.events.equals(b.events) and a.segments.equals(b.segments)
    assert a.events.height > 9000


def test_zstd_without_the_package_says_so(tmp_path: Path) -> None:
    from traceinsight.errors import TraceFormatError

    path = tmp_path / "s.pickle.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\0" * 32)
    try:
        import zstandard  # noqa: F401
    except ImportError:
        with pytest.raises(TraceFormatError, match="zstandard package is not installed"):
            load_memory_snapshot(path)
    else:
        with pytest.raises(TraceFormatError):
            load_memory_snapshot(path)


def test_compressed_pickle_that_runs_code_is_refused(tmp_path: Path) -> None:
    import gzip
    import pickle

    from traceinsight.errors import TraceFormatError

    class Boom:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("ran",))

    path = tmp_path / "evil.pickle.gz"
    path.write_bytes(gzip.compress(pickle.dumps({"segments": [Boom()]})))
    with pytest.raises(TraceFormatError, match="refused"):
        load_memory_snapshot(path)


def test_growth_is_not_a_leak_on_a_real_doubling_loop() -> None:
    # Recorded: an input that doubles each iteration, the previous one freed (doubling.json).
    facts = json.loads((SAMPLES / "alloc" / "doubling.json").read_text())
    lk = analyze_snapshot(load_memory_snapshot(SAMPLES / "alloc" / "doubling.pickle.gz")).leaks
    assert lk.leaks is not None and lk.leaks.is_empty()
    assert lk.growing is not None
    row = lk.growing.row(0, named=True)
    assert f"({facts['grow_function']})" in row["site"]
    assert (row["first_blocks"], row["last_blocks"]) == (1, 1)


def test_retention_stays_a_leak_on_a_real_leak() -> None:
    lk = analyze_snapshot(load_memory_snapshot(SAMPLES / "h200" / "leak.pickle")).leaks
    assert lk.leaks is not None and lk.leaks.height == 1
    assert "(leak_step)" in lk.leaks["site"][0]
    assert lk.leaks["last_blocks"][0] > lk.leaks["first_blocks"][0]


def test_replay_seeded_when_the_history_is_cut_short(tmp_path: Path) -> None:
    """Synthesised (the shape is what matters): a 100 MiB segment reserved, and two 30 MiB
    blocks allocated in it, before the recorded history begins; the trace frees one and
    allocates into the hole and the free tail. Without the segment seeded, the replay would
    reserve fresh 30 MiB segments for the blocks held before the trace and miss the 100 MiB."""
    from tests.snapshot_builder import SnapshotBuilder, stack

    b = SnapshotBuilder()
    b.segment(100 * MiB, record=False)
    first = b.alloc(30 * MiB, stack("/home/user/train.py", 5, "setup"), record=False)
    b.alloc(30 * MiB, stack("/home/user/train.py", 6, "setup"), record=False)
    b.free(first)
    for _ in range(3):
        kept = b.alloc(20 * MiB, stack("/home/user/train.py", 9, "step"))
        b.free(kept)
    b.alloc(35 * MiB, stack("/home/user/train.py", 12, "step"))
    w = analyze_snapshot(load_memory_snapshot(b.dump(tmp_path / "cut.pickle"))).allocator
    assert w.recorded_peak_reserved_bytes == 100 * MiB
    assert w.replayed_peak_reserved_bytes == 100 * MiB
    assert w.runs is not None and w.runs["cudamalloc_calls"][0] == 0
