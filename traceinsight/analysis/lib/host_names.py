"""Host event names that mean something to several analyses: synchronising calls, data loading
and the CUDA/HIP allocator's own calls.

Matched once per distinct name (regexes over a few thousand names, not over every event).
"""

from __future__ import annotations

import polars as pl

SYNC_CALL_PATTERN = (
    r"^(cuda|hip)(Stream|Device|Event|Ctx|Thread)Synchronize"
    r"|^cu(Stream|Ctx|Event)Synchronize"
    r"|^(cuda|hip)Memcpy(2D|3D)?$|^hipMemcpyWithStream$"
    r"|^cuMemcpy(DtoH|HtoD|DtoD)?(_v2)?$"
)
SYNC_OPS = ("aten::_local_scalar_dense", "aten::item")
DATA_LOADING_PATTERN = r"(?i)dataloader|data_load|data[ _]loading|dataloading|torch/utils/data/"
# Replays of a captured CUDA/HIP graph (runtime or driver API, versioned names included).
GRAPH_LAUNCH_PATTERN = r"^(cuda|hip|cu)GraphLaunch"
# Host calls that put work on a GPU: kernel and graph launches, asynchronous copies and memsets
# (runtime and driver API, CUDA and HIP, versioned names included).
GPU_WORK_CALL_PATTERN = (
    r"^(cuda|hip|cu)\w*Launch\w*Kernel|^(cuda|hip|cu)GraphLaunch|^hipExtLaunch"
    r"|^(cuda|hip)(Memcpy|Memset)\w*Async|^cuMem(cpy|set)\w*Async"
)
# Device memory taken from or given back to the driver (the caching allocator's misses, empty_cache).
ALLOCATOR_CALLS = r"^(cuda|hip)(Malloc|Free)(Async|Host)?$|^cuMem(Alloc|Free)"


def name_matches(frame: pl.DataFrame, pattern: str, column: str = "name") -> pl.Expr:
    """True where ``frame``'s (categorical) ``column`` matches the regex ``pattern``.

    The regex runs once per distinct name and the rows are then matched by membership: casting
    a categorical name column to strings and searching every event costs far more on traces of
    hundreds of thousands of events with a few thousand names.
    """
    names = frame.get_column(column).unique().drop_nulls()
    hits = names.filter(names.cast(pl.String).str.contains(pattern))
    return pl.col(column).is_in(hits.implode())


def is_data_loading() -> pl.Expr:
    return pl.col("name").cast(pl.String).str.contains(DATA_LOADING_PATTERN)


def with_name_flags(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` plus ``is_sync_name`` / ``is_data_name`` / ``is_alloc_name``, matched once per distinct name
    (regexes over a few thousand names, not over every event)."""
    names = events.select(pl.col("name").unique()).with_columns(
        is_sync_name=pl.col("name").cast(pl.String).str.contains(SYNC_CALL_PATTERN)
        | pl.col("name").cast(pl.String).is_in(list(SYNC_OPS)),
        is_data_name=is_data_loading(),
        is_alloc_name=pl.col("name").cast(pl.String).str.contains(ALLOCATOR_CALLS),
    )
    return events.join(names, on="name", how="left", maintain_order="left")


def gpu_work_calls(events: pl.DataFrame) -> pl.DataFrame:
    """The host's calls that put work on a GPU, by name: ``name``, ``calls``, most first."""
    calls = (
        events.filter(pl.col("kind").cast(pl.String).is_in(["runtime", "driver"]))
        .group_by(pl.col("name").cast(pl.String))
        .agg(calls=pl.len())
    )
    return calls.filter(pl.col("name").str.contains(GPU_WORK_CALL_PATTERN)).sort(
        ["calls", "name"], descending=[True, False]
    )
