"""Memory over time, stacked by the sites that hold most at the peak, at a fixed number of points.

A trace of millions of events is drawn from a few hundred points: the events are cut into
``points`` buckets of equal event count and each bucket is represented by its event with the
most allocated memory, so the drawn line keeps every peak a bucket holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceinsight.analysis.snapshot.replay import DeviceReplay, live_at
from traceinsight.analysis.snapshot.roles import ROLES
from traceinsight.analysis.snapshot.sites import BEFORE_TRACE

OTHER = "(other sites)"


@dataclass(frozen=True)
class Timeline:
    """``series``: one row per (site, point) with ``live_bytes``; ``points``: idx, time_us,
    allocated_bytes, reserved_bytes per point. ``sites`` in stacking order (largest at the peak first)."""

    sites: tuple[str, ...]
    points: pl.DataFrame
    series: pl.DataFrame
    # the same points stacked by role (roles.py), in ROLES order; empty without roles
    roles: tuple[str, ...] = ()
    role_series: pl.DataFrame | None = None


def timeline(
    replay: DeviceReplay, peak_sites: pl.DataFrame | None, *, points: int = 300, top: int = 6
) -> Timeline:
    levels = replay.levels
    if levels.is_empty():
        return Timeline((), pl.DataFrame(), pl.DataFrame())
    n = levels.height
    chosen = (
        levels.with_row_index("row")
        .with_columns((pl.col("row") * points // n).alias("bucket"))
        .sort(["bucket", "allocated_bytes", "idx"], descending=[False, True, False])
        .group_by("bucket", maintain_order=True)
        .first()
        .select("idx", "time_us", "allocated_bytes", "reserved_bytes")
    )
    named = (
        []
        if peak_sites is None
        else [s for s in peak_sites["site"].to_list() if s != BEFORE_TRACE][:top]
    )
    grouped = replay.allocations.with_columns(
        pl.when(pl.col("site").is_in(named))
        .then(pl.col("site"))
        .otherwise(pl.lit(OTHER))
        .alias("group")
    )
    at = chosen["idx"].to_list()
    series = live_at(grouped, at, key="group").rename({"group": "site"})
    if "role" not in replay.allocations.columns:
        return Timeline((*named, OTHER), chosen, series)
    present = set(replay.allocations["role"].unique().to_list())
    roles = tuple(r for r in ROLES if r in present)
    return Timeline(
        (*named, OTHER), chosen, series, roles, live_at(replay.allocations, at, key="role")
    )
