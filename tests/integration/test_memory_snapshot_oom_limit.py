"""Which limit an out-of-memory error hit: the device, or a per-process cap."""

from __future__ import annotations

from pathlib import Path

from tests.snapshot_builder import MiB, SnapshotBuilder, stack
from traceinsight.analysis.snapshot.report import analyze_snapshot
from traceinsight.trace.snapshot.load import load_memory_snapshot

H200_OOM = (
    Path(__file__).resolve().parents[2] / "sample_traces" / "memory" / "h200" / "oom.pickle"
)


def test_device_limit_on_a_real_oom() -> None:
    # Recorded on an H200: 2 GiB allocations until the device was full.
    o = analyze_snapshot(load_memory_snapshot(H200_OOM)).oom
    assert o.limit == "device"
    assert o.device_free_bytes < o.request_bytes
    assert o.shortfall_bytes == o.request_bytes - o.device_free_bytes
    assert o.limit_bytes == o.reserved_bytes + o.device_free_bytes


def test_process_cap_when_the_device_had_room(tmp_path: Path) -> None:
    # Synthesised (the shape is what matters): 1.5 GiB asked with 130 GiB free on the device,
    # as under torch.cuda.set_per_process_memory_fraction.
    b = SnapshotBuilder()
    b.segment(100 * MiB)
    b.alloc(90 * MiB, stack("/home/user/train.py", 10, "step"))
    b.oom(1536 * MiB, 130 * 1024 * MiB)
    r = analyze_snapshot(load_memory_snapshot(b.dump(tmp_path / "s.pickle")))
    o = r.oom
    assert o.limit == "process_cap"
    assert "per-process cap" in o.limit_text
    # 10 MiB of the 100 MiB reserved was free: 1526 MiB more must be freed to be sure to fit
    assert o.shortfall_bytes == 1536 * MiB - 10 * MiB
    # all that is held (90 MiB) cannot free that much: no fix is offered
    assert o.fix is None and not any(f.covers for f in o.fixes)
