"""The loaded snapshot: frozen polars frames plus what the file says about itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl

# The allocator's trace actions (torch/csrc/cuda/memory_snapshot.cpp). ``alloc`` and
# ``free_completed`` change allocated memory; ``free_requested`` only marks a block whose
# stream use has yet to finish; the segment actions change reserved memory.
ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
)

SEGMENT_SCHEMA = pl.Schema(
    {
        "segment_id": pl.Int64(),
        "device": pl.Int64(),
        "address": pl.Int64(),
        "total_size_bytes": pl.Int64(),
        "allocated_bytes": pl.Int64(),
        "active_bytes": pl.Int64(),
        "requested_bytes": pl.Int64(),
        "stream": pl.Int64(),
        "segment_type": pl.String(),
        "is_expandable": pl.Boolean(),
        "stack_id": pl.Int64(),
    }
)
BLOCK_SCHEMA = pl.Schema(
    {
        "segment_id": pl.Int64(),
        "device": pl.Int64(),
        "block_index": pl.Int64(),  # position inside its segment, from its start
        "address": pl.Int64(),
        "size_bytes": pl.Int64(),
        "requested_size_bytes": pl.Int64(),
        "state": pl.String(),  # active_allocated | active_pending_free | inactive
        "stack_id": pl.Int64(),
    }
)
EVENT_SCHEMA = pl.Schema(
    {
        "device": pl.Int64(),
        "idx": pl.Int64(),  # position in its device's trace, oldest first
        "action": pl.String(),
        "addr": pl.Int64(),
        "size_bytes": pl.Int64(),
        "stream": pl.Int64(),
        "time_us": pl.Int64(),  # absent in snapshots of older PyTorch releases
        "device_free_bytes": pl.Int64(),  # oom only: free device memory cudaMemGetInfo reported
        "stack_id": pl.Int64(),
    }
)
FRAME_SCHEMA = pl.Schema(
    {
        "stack_id": pl.Int64(),
        "depth": pl.Int64(),  # 0 = innermost frame (where the allocation was asked for)
        "filename": pl.String(),
        "line": pl.Int64(),
        "name": pl.String(),
    }
)

Layout = Literal["current", "segments-only"]


@dataclass(frozen=True)
class MemorySnapshot:
    """A ``torch.cuda.memory._dump_snapshot`` pickle as frames.

    ``segments`` and ``blocks`` are the allocator's state when the snapshot was taken;
    ``events`` the recorded trace before it (``_record_memory_history``), one row per event;
    ``frames`` the call stacks, each stored once and referred to by ``stack_id``.
    ``layout`` is ``segments-only`` for the older pickles that held just the segment list.
    """

    path: str
    file_bytes: int
    layout: Layout
    segments: pl.DataFrame
    blocks: pl.DataFrame
    events: pl.DataFrame
    frames: pl.DataFrame
    allocator_settings: dict[str, Any] = field(default_factory=dict)

    @property
    def devices(self) -> list[int]:
        found = set(self.segments["device"].to_list()) | set(
            self.events["device"].unique().to_list()
        )
        return sorted(found)

    def stack(self, stack_id: int) -> list[tuple[str, int, str]]:
        """The frames of one stack, innermost first, as ``(filename, line, name)``."""
        rows = self.frames.filter(pl.col("stack_id") == stack_id).sort("depth")
        return list(
            zip(
                rows["filename"].to_list(),
                rows["line"].to_list(),
                rows["name"].to_list(),
                strict=True,
            )
        )
