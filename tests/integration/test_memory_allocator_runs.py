"""Several allocator settings replayed sharing the small pool (``allocator_runs``): each run
must be the one a whole replay under that setting gives, on every real snapshot recorded."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from traceinsight.analysis.snapshot.allocator import (
    AllocatorSettings,
    allocation_size,
    round_size,
)
from traceinsight.analysis.snapshot.allocator_runs import simulate, simulate_each
from traceinsight.analysis.snapshot.replay import replay
from traceinsight.analysis.snapshot.sites import sites
from traceinsight.analysis.snapshot.whatif import alternatives, requests
from traceinsight.trace.snapshot.load import load_memory_snapshot

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces" / "memory"
RECORDED = sorted(p for d in ("h200", "captured", "alloc") for p in (SAMPLES / d).glob("*.pickle*"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_shared_replay_gives_each_whole_replay(path: Path) -> None:
    snapshot = load_memory_snapshot(path)
    device = int(snapshot.events["device"][0]) if snapshot.events.height else 0
    trace = requests(snapshot, replay(snapshot, device, sites(snapshot)))
    largest = allocation_size(round_size(max(trace[2], default=0)))
    tried = [AllocatorSettings(), *alternatives(AllocatorSettings(), max(largest, 1 << 30))]
    assert len(tried) >= 4  # expandable, and max_split_size_mb at 64, 256 and 1024
    whole = [simulate(*trace, settings=s) for s in tried]
    assert simulate_each(trace, tried) == whole


def test_a_limit_replays_each_setting_whole() -> None:
    # Under a limit the pools meet (a failing request frees cached blocks of both): the OOM
    # recording is replayed under the cap it shows, and must still match whole replays.
    snapshot = load_memory_snapshot(SAMPLES / "alloc" / "oom_cap.pickle.gz")
    trace = requests(snapshot, replay(snapshot, 0, sites(snapshot)))
    tried = [
        replace(s, limit_bytes=6 << 30)
        for s in (AllocatorSettings(), AllocatorSettings(expandable_segments=True))
    ]
    runs = simulate_each(trace, tried)
    assert runs == [simulate(*trace, settings=s) for s in tried]
    assert any(r.ooms for r in runs)
