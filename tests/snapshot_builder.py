"""Hand-made allocator snapshots: a tiny caching allocator that records what PyTorch records.

Segments are reserved explicitly, allocations carved from them at the lowest free address; ``dump``
writes the pickle ``torch.cuda.memory._dump_snapshot`` would: the segments with their blocks
(live allocations active, the gaps between them inactive) and the trace of every event.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Frame = dict[str, Any]

BASE_ADDRESS = 0x7F00_0000_0000
MiB = 1 << 20


def stack(filename: str, line: int, name: str, *, forward: bool = False) -> list[Frame]:
    """Innermost first: two PyTorch frames, then the user's line, then its callers (a ``forward``
    frame in between when ``forward``), then the interpreter's runpy frame."""
    frames = [
        {
            "filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py",
            "line": 125,
            "name": "forward",
        },
        {
            "filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py",
            "line": 1750,
            "name": "_call_impl",
        },
        {"filename": filename, "line": line, "name": name},
    ]
    if forward:
        frames.append({"filename": "/home/user/model.py", "line": 20, "name": "forward"})
    frames.append({"filename": "/home/user/train.py", "line": 99, "name": "main"})
    frames.append({"filename": "<frozen runpy>", "line": 88, "name": "_run_code"})
    return frames


@dataclass
class _Segment:
    address: int
    size: int
    expandable: bool
    live: dict[int, tuple[int, list[Frame]]] = field(default_factory=dict)  # addr -> (size, frames)

    def first_fit(self, size: int) -> int | None:
        """The lowest address with ``size`` free bytes, as a split block would be reused."""
        cursor = self.address
        for addr in sorted(self.live):
            if addr - cursor >= size:
                return cursor
            cursor = addr + self.live[addr][0]
        return cursor if self.address + self.size - cursor >= size else None


class SnapshotBuilder:
    def __init__(self, *, device: int = 0, step_us: int = 10, times: bool = True) -> None:
        self.device = device
        self.events: list[dict[str, Any]] = []
        self.segments: list[_Segment] = []
        self.next_address = BASE_ADDRESS
        self.clock_us = 1_000_000
        self.step_us = step_us
        self.times = times

    def _event(
        self, action: str, size: int, frames: list[Frame] | None = None, **extra: Any
    ) -> None:
        self.clock_us += self.step_us
        entry: dict[str, Any] = {
            "action": action,
            "size": size,
            "stream": 0,
            "frames": frames or [],
        }
        entry.update(extra)
        if self.times:
            entry["time_us"] = self.clock_us
        self.events.append(entry)

    def segment(self, size: int, *, expandable: bool = False, record: bool = True) -> int:
        seg = _Segment(self.next_address, size, expandable)
        self.next_address += size + 64 * MiB
        self.segments.append(seg)
        if record:
            self._event("segment_alloc", size, addr=seg.address)
        return len(self.segments) - 1

    def alloc(
        self, size: int, frames: list[Frame], *, segment: int = -1, record: bool = True
    ) -> int:
        seg = self.segments[segment]
        addr = seg.first_fit(size)
        if addr is None:
            raise ValueError("segment full")
        seg.live[addr] = (size, frames)
        if record:
            self._event("alloc", size, frames, addr=addr)
        return addr

    def free(self, addr: int, *, record: bool = True) -> None:
        for seg in self.segments:
            if addr in seg.live:
                size, _ = seg.live.pop(addr)
                if record:
                    self._event("free_requested", size, addr=addr)
                    self._event("free_completed", size, addr=addr)
                return
        raise KeyError(addr)

    def release(self, segment: int) -> None:
        """Give an empty segment back to the driver (``segment_free``), as ``empty_cache`` does."""
        seg = self.segments.pop(segment)
        if seg.live:
            raise ValueError("segment still holds allocations")
        self._event("segment_free", seg.size, addr=seg.address)

    def oom(self, size: int, device_free: int) -> None:
        self._event(
            "oom", size, stack("/home/user/train.py", 57, "train_step"), device_free=device_free
        )

    def snapshot_dict(self, *, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        segments = []
        for seg in self.segments:
            blocks: list[dict[str, Any]] = []
            cursor = seg.address
            for addr in sorted(seg.live):
                size, frames = seg.live[addr]
                if addr > cursor:
                    blocks.append(
                        {
                            "address": cursor,
                            "size": addr - cursor,
                            "requested_size": 0,
                            "state": "inactive",
                            "frames": [],
                        }
                    )
                blocks.append(
                    {
                        "address": addr,
                        "size": size,
                        "requested_size": size,
                        "state": "active_allocated",
                        "frames": frames,
                    }
                )
                cursor = addr + size
            end = seg.address + seg.size
            if cursor < end:
                blocks.append(
                    {
                        "address": cursor,
                        "size": end - cursor,
                        "requested_size": 0,
                        "state": "inactive",
                        "frames": [],
                    }
                )
            allocated = sum(size for size, _ in seg.live.values())
            segments.append(
                {
                    "device": self.device,
                    "address": seg.address,
                    "total_size": seg.size,
                    "allocated_size": allocated,
                    "active_size": allocated,
                    "requested_size": allocated,
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": seg.expandable,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        traces: list[list[dict[str, Any]]] = [[] for _ in range(self.device + 1)]
        traces[self.device] = self.events
        data: dict[str, Any] = {"segments": segments, "device_traces": traces}
        data["allocator_settings"] = (
            settings
            if settings is not None
            else {"expandable_segments": False, "PYTORCH_CUDA_ALLOC_CONF": ""}
        )
        return data

    def dump(
        self, path: Path, *, protocol: int = 4, settings: dict[str, Any] | None = None
    ) -> Path:
        path.write_bytes(pickle.dumps(self.snapshot_dict(settings=settings), protocol=protocol))
        return path
