"""The hand-made sample under sample_traces/memory/: reproducible, and each answer as built."""

from __future__ import annotations

import pickle
from pathlib import Path

from tests import snapshot_samples as sample
from tests.snapshot_builder import MiB
from traceinsight.analysis.snapshot.report import analyze_snapshot
from traceinsight.trace.snapshot.load import load_memory_snapshot

LEAK_SITE = "/home/user/train.py:57 (train_step)"
ACT_SITE = "/home/user/model.py:31 (block)"
WEIGHTS_SITE = "/home/user/model.py:14 (__init__)"


def test_sample_is_what_the_generator_writes(tmp_path: Path) -> None:
    assert pickle.loads(sample.SAMPLE.read_bytes()) == sample.build().snapshot_dict()
    assert sample.SAMPLE.stat().st_size < 200_000


def test_sample_answers() -> None:
    r = analyze_snapshot(load_memory_snapshot(sample.SAMPLE))
    # peak: the last full step's four activations, the weights, ten leaked tensors
    assert (
        r.peak.peak_allocated_bytes
        == sample.WEIGHTS_BYTES + 4 * sample.ACTIVATION_BYTES + sample.STEPS * sample.LEAK_BYTES
    )
    assert r.peak.sites is not None
    assert r.peak.sites["site"].to_list() == [ACT_SITE, WEIGHTS_SITE, LEAK_SITE]
    # leak: one 48 MiB tensor per step; the bursty activation site is not taken for the step marker
    # the leaking site allocates once per step, steadily: its allocations mark the iterations
    # (the activation site allocates in bursts of four and is passed over)
    assert r.leaks.iterations == sample.STEPS - 1  # whole ones: from one leak to the next
    assert LEAK_SITE in r.leaks.method
    assert r.leaks.leaks is not None
    assert r.leaks.leaks.select("site", "growth_per_iteration_bytes").rows() == [
        (LEAK_SITE, sample.LEAK_BYTES)
    ]
    # OOM: 2.5 GiB asked with 512 MiB free; 3.5 GiB reserved but free, largest free block 2 GiB
    o = r.oom
    assert (o.request_bytes, o.device_free_bytes, o.shortfall_bytes) == (
        sample.OOM_REQUEST_BYTES,
        sample.OOM_DEVICE_FREE_BYTES,
        2048 * MiB,
    )
    assert (
        o.allocated_bytes
        == sample.WEIGHTS_BYTES + 2 * sample.ACTIVATION_BYTES + sample.STEPS * sample.LEAK_BYTES
    )
    assert o.fix is not None and o.fix.kind == "expandable_segments"
    f = r.fragmentation
    assert (f.largest_inactive_bytes, f.largest_request_bytes, f.inactive_tail_bytes) == (
        2080 * MiB,
        2560 * MiB,
        768 * MiB + 2080 * MiB,
    )
    # a hand-made layout the allocator would not make: the replay does not run out where it
    # did, so no setting is predicted for it
    assert not f.expandable_would_help and f.advice.startswith("no prediction")
