"""The recorded trace replayed: each allocation's lifetime and memory levels after each event.

``alloc`` adds its size to allocated memory and ``free_completed`` removes it (``free_requested``
only marks a block a stream still uses); ``segment_alloc``/``segment_map`` add to reserved
memory and ``segment_free``/``segment_unmap`` remove from it. The trace is a ring buffer of the
last ``max_entries`` events, so it can start with memory already held: allocations freed in the
trace without their ``alloc``, and blocks still active in the snapshot without one, were made
before it began and form the starting level.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceinsight.analysis.snapshot.sites import with_site
from traceinsight.trace.snapshot.model import MemorySnapshot

ALLOCATION_SCHEMA = pl.Schema(
    {
        "addr": pl.Int64(),
        "size_bytes": pl.Int64(),
        "alloc_idx": pl.Int64(),  # -1: made before the recorded trace began
        "free_idx": pl.Int64(),  # null: still allocated when the snapshot was taken
        "stack_id": pl.Int64(),
    }
)

_RESERVE = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass(frozen=True)
class DeviceReplay:
    """One device's trace replayed."""

    device: int
    allocations: pl.DataFrame  # ALLOCATION_SCHEMA + site, in_forward
    levels: pl.DataFrame  # idx, action, time_us, size_bytes, device_free_bytes, allocated_bytes, reserved_bytes (after the event)
    start_allocated_bytes: int
    start_reserved_bytes: int
    end_allocated_bytes: int  # the snapshot's active blocks
    end_reserved_bytes: int  # the snapshot's segments

    def alive_at(self, idx: int | None) -> pl.DataFrame:
        """Allocations held just after event ``idx`` (None: when the snapshot was taken)."""
        frame = self.allocations
        if idx is None:
            return frame.filter(pl.col("free_idx").is_null())
        return frame.filter(
            (pl.col("alloc_idx") <= idx)
            & (pl.col("free_idx").is_null() | (pl.col("free_idx") > idx))
        )


def default_device(snapshot: MemorySnapshot) -> int:
    """The device with the most events (else the most reserved memory, else 0)."""
    if not snapshot.events.is_empty():
        counts = (
            snapshot.events.group_by("device")
            .len()
            .sort(["len", "device"], descending=[True, False])
        )
        return int(counts["device"][0])
    if not snapshot.segments.is_empty():
        reserved = (
            snapshot.segments.group_by("device")
            .agg(pl.col("total_size_bytes").sum())
            .sort(["total_size_bytes", "device"], descending=[True, False])
        )
        return int(reserved["device"][0])
    return 0


def replay(snapshot: MemorySnapshot, device: int, site_table: pl.DataFrame) -> DeviceReplay:
    events = device_events(snapshot.events, device)
    blocks = snapshot.blocks.filter((pl.col("device") == device) & (pl.col("state") != "inactive"))
    segments = snapshot.segments.filter(pl.col("device") == device)
    allocations = _allocations(events, blocks)
    allocations = with_site(allocations, site_table, before_trace=pl.col("alloc_idx") < 0)
    start_allocated = int(allocations.filter(pl.col("alloc_idx") < 0)["size_bytes"].sum())

    signed = (
        pl.when(pl.col("action") == "alloc")
        .then(pl.col("size_bytes"))
        .when(pl.col("action") == "free_completed")
        .then(-pl.col("size_bytes"))
        .otherwise(0)
    )
    reserve = pl.col("action").replace_strict(_RESERVE, default=0, return_dtype=pl.Int64) * pl.col(
        "size_bytes"
    ).fill_null(0)
    levels = events.select(
        "idx",
        "action",
        "time_us",
        "size_bytes",
        "device_free_bytes",
        signed.fill_null(0).cum_sum().alias("allocated_delta"),
        reserve.cum_sum().alias("reserved_delta"),
    )
    end_reserved = int(segments["total_size_bytes"].sum())
    net_reserved = int(levels["reserved_delta"][-1]) if levels.height else 0
    lowest_reserved = int(levels["reserved_delta"].min() or 0) if levels.height else 0  # type: ignore[arg-type]
    # The snapshot's segments are the level after the last event; a trace that frees more than
    # it shows being reserved started at least that high.
    start_reserved = max(end_reserved - net_reserved, -lowest_reserved, 0)
    levels = levels.select(
        "idx",
        "action",
        "time_us",
        "size_bytes",
        "device_free_bytes",
        (pl.col("allocated_delta") + start_allocated).alias("allocated_bytes"),
        (pl.col("reserved_delta") + start_reserved).alias("reserved_bytes"),
    )
    return DeviceReplay(
        device=device,
        allocations=allocations,
        levels=levels,
        start_allocated_bytes=start_allocated,
        start_reserved_bytes=start_reserved,
        end_allocated_bytes=int(blocks["size_bytes"].sum()),
        end_reserved_bytes=end_reserved,
    )


def device_events(events: pl.DataFrame, device: int) -> pl.DataFrame:
    """The device's events in trace order. Most snapshots hold one device, whose events the
    loader keeps in order: then the frame itself, not a filtered and sorted copy of millions of
    rows (the largest part of the answers' memory on a big snapshot)."""
    devices = events["device"]
    if devices.null_count() == 0 and devices.n_unique() == 1 and devices[0] == device:
        mine = events
    else:
        mine = events.filter(pl.col("device") == device)
    return mine if mine["idx"].is_sorted() else mine.sort("idx")


def _allocations(events: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """Each allocation's lifetime: an ``alloc`` paired with the next ``free_completed`` of its address."""
    pairs = (
        events.filter(pl.col("action").is_in(["alloc", "free_completed"]))
        .select("idx", "action", "addr", "size_bytes", "stack_id")
        .sort(["addr", "idx"])
        .with_columns(
            pl.col("action").shift(-1).over("addr").alias("next_action"),
            pl.col("idx").shift(-1).over("addr").alias("next_idx"),
            pl.col("action").shift(1).over("addr").alias("prev_action"),
        )
    )
    made = pairs.filter(pl.col("action") == "alloc").select(
        "addr",
        "size_bytes",
        pl.col("idx").alias("alloc_idx"),
        pl.when(pl.col("next_action") == "free_completed")
        .then(pl.col("next_idx"))
        .alias("free_idx"),
        "stack_id",
    )
    # Freed in the trace but allocated before it: its site is unknown (a free's stack is where
    # it was freed, not where it was made).
    before = pairs.filter(
        (pl.col("action") == "free_completed")
        & (pl.col("prev_action").is_null() | (pl.col("prev_action") != "alloc"))
    ).select(
        "addr",
        "size_bytes",
        pl.lit(-1, pl.Int64).alias("alloc_idx"),
        pl.col("idx").alias("free_idx"),
        pl.lit(None, pl.Int64).alias("stack_id"),
    )
    # Still active in the snapshot without an open alloc in the trace: made before it began;
    # the block keeps the stack it was allocated with.
    open_addrs = made.filter(pl.col("free_idx").is_null()).select("addr")
    held = blocks.join(open_addrs, left_on="address", right_on="addr", how="anti").select(
        pl.col("address").alias("addr"),
        "size_bytes",
        pl.lit(-1, pl.Int64).alias("alloc_idx"),
        pl.lit(None, pl.Int64).alias("free_idx"),
        "stack_id",
    )
    return pl.concat(
        [made.cast(ALLOCATION_SCHEMA), before.cast(ALLOCATION_SCHEMA), held.cast(ALLOCATION_SCHEMA)]
    )


def live_at(allocations: pl.DataFrame, points: list[int], key: str = "site") -> pl.DataFrame:
    """Bytes held per ``key`` just after each event index in ``points`` (sorted): one row per
    (key, point), zeros included. Each allocation adds its size at its ``alloc_idx`` and takes
    it back at its ``free_idx``; the signed sizes are summed per point and accumulated, so the
    cost is one pass over the allocations, not allocations × points."""
    schema = pl.Schema(
        {key: pl.String(), "point": pl.Int64(), "idx": pl.Int64(), "live_bytes": pl.Int64()}
    )
    if not points or allocations.is_empty():
        return pl.DataFrame(schema=schema)
    edges = pl.Series("edges", points, dtype=pl.Int64)
    deltas = pl.concat(
        [
            allocations.select(
                key, pl.col("alloc_idx").alias("at"), pl.col("size_bytes").alias("delta")
            ),
            allocations.filter(pl.col("free_idx").is_not_null()).select(
                key, pl.col("free_idx").alias("at"), (-pl.col("size_bytes")).alias("delta")
            ),
        ]
    )
    # The first point at or after the change is the first one that sees it.
    deltas = deltas.with_columns(
        edges.search_sorted(deltas["at"], side="left").cast(pl.Int64).alias("point")
    ).filter(pl.col("point") < len(points))
    summed = deltas.group_by(key, "point").agg(pl.col("delta").sum())
    grid = allocations.select(pl.col(key).unique()).join(
        pl.DataFrame(
            {"point": list(range(len(points))), "idx": points},
            schema={"point": pl.Int64, "idx": pl.Int64},
        ),
        how="cross",
    )
    return (
        grid.join(summed, on=[key, "point"], how="left")
        .sort([key, "point"])
        .select(
            key,
            "point",
            "idx",
            pl.col("delta").fill_null(0).cum_sum().over(key).alias("live_bytes"),
        )
        .cast(schema)
    )
