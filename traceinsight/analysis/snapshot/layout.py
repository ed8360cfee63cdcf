"""The allocator's segments and blocks at an event of the trace, rebuilt from the snapshot.

The snapshot gives the layout when it was dumped, which can be long after the moment that
matters (the out-of-memory error, with the program's teardown after it). Going back from the
dumped state: a segment allocated after the moment did not exist then, one freed after it did
(with the size its free says); the blocks of each segment are the allocations held at the
moment, in address order, and the gaps between them and at the end are its free blocks.
Expandable segments grow and shrink by mapped pages, which this does not follow: for them only
the dumped state is known.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.trace.snapshot.model import MemorySnapshot

_SEGMENT_EVENTS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")


def layout_at(
    snapshot: MemorySnapshot, replay: DeviceReplay, at: int
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """``(segments, blocks)`` just after event ``at``, shaped as the snapshot's own frames
    (``segment_id``, ``address``, ``total_size_bytes`` / ``segment_id``, ``block_index``,
    ``address``, ``size_bytes``, ``state``); None where segments are expandable."""
    device = replay.device
    dumped = snapshot.segments.filter(pl.col("device") == device)
    if bool(dumped["is_expandable"].fill_null(False).any()):
        return None
    moves = snapshot.events.filter(
        (pl.col("device") == device) & pl.col("action").is_in(_SEGMENT_EVENTS)
    )
    if moves["action"].is_in(["segment_map", "segment_unmap"]).any():
        return None
    later = (
        moves.filter(pl.col("idx") > at).sort("idx").group_by("addr", maintain_order=True).first()
    )
    kept = dumped.select("address", "total_size_bytes").join(
        later.select(pl.col("addr").alias("address")), on="address", how="anti"
    )
    freed_later = later.filter(pl.col("action") == "segment_free").select(
        pl.col("addr").alias("address"), pl.col("size_bytes").alias("total_size_bytes")
    )
    segments = (
        pl.concat([kept, freed_later])
        .sort("address")
        .with_row_index("segment_id")
        .with_columns(
            pl.col("segment_id").cast(pl.Int64),
            (pl.col("address") + pl.col("total_size_bytes")).alias("end"),
        )
    )
    held = (
        replay.alive_at(at)
        .select(pl.col("addr").alias("address"), "size_bytes")
        .sort("address")
        .join_asof(
            segments.select("segment_id", pl.col("address").alias("start"), "end"),
            left_on="address",
            right_on="start",
            strategy="backward",
        )
        .filter(pl.col("segment_id").is_not_null() & (pl.col("address") < pl.col("end")))
        .with_columns((pl.col("address") + pl.col("size_bytes")).alias("stop"))
    )
    # The free block before each held one: from the end of the previous (or the segment's start).
    before = held.with_columns(
        pl.col("stop").shift(1).over("segment_id").fill_null(pl.col("start")).alias("free_from")
    ).filter(pl.col("address") > pl.col("free_from"))
    last_stop = held.group_by("segment_id").agg(pl.col("stop").max())
    tails = (
        segments.join(last_stop, on="segment_id", how="left")
        .with_columns(pl.col("stop").fill_null(pl.col("address")))
        .filter(pl.col("end") > pl.col("stop"))
    )
    blocks = (
        pl.concat(
            [
                held.select(
                    "segment_id", "address", "size_bytes", pl.lit("active_allocated").alias("state")
                ),
                before.select(
                    "segment_id",
                    pl.col("free_from").alias("address"),
                    (pl.col("address") - pl.col("free_from")).alias("size_bytes"),
                    pl.lit("inactive").alias("state"),
                ),
                tails.select(
                    "segment_id",
                    pl.col("stop").alias("address"),
                    (pl.col("end") - pl.col("stop")).alias("size_bytes"),
                    pl.lit("inactive").alias("state"),
                ),
            ]
        )
        .sort(["segment_id", "address"])
        .with_columns(pl.int_range(pl.len()).over("segment_id").cast(pl.Int64).alias("block_index"))
    )
    return segments.drop("end"), blocks
