"""Two snapshots compared: the change of peak memory and of what each site held at the peak."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.peak import PeakResult


@dataclass(frozen=True)
class SnapshotCompareResult(Result):
    """``sites``: site, before_bytes, after_bytes, change_bytes (after minus before), largest change first."""

    name: ClassVar[str] = "memory_compare"
    before_path: str = ""
    after_path: str = ""
    before_peak_bytes: int = 0
    after_peak_bytes: int = 0
    peak_change_bytes: int = 0
    before_peak_reserved_bytes: int = 0
    after_peak_reserved_bytes: int = 0
    peak_reserved_change_bytes: int = 0
    sites: pl.DataFrame | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.sites if self.sites is not None else pl.DataFrame()


def run(
    before_path: str, before: PeakResult, after_path: str, after: PeakResult
) -> SnapshotCompareResult:
    empty = pl.DataFrame(schema={"site": pl.String, "bytes": pl.Int64})
    left = (before.sites if before.sites is not None else empty).select(
        "site", pl.col("bytes").alias("before_bytes")
    )
    right = (after.sites if after.sites is not None else empty).select(
        "site", pl.col("bytes").alias("after_bytes")
    )
    sites = (
        left.join(right, on="site", how="full", coalesce=True)
        .with_columns(pl.col("before_bytes").fill_null(0), pl.col("after_bytes").fill_null(0))
        .with_columns((pl.col("after_bytes") - pl.col("before_bytes")).alias("change_bytes"))
        .filter(pl.col("change_bytes") != 0)
        .sort([pl.col("change_bytes").abs(), pl.col("site")], descending=[True, False])
    )
    return SnapshotCompareResult(
        before_path=before_path,
        after_path=after_path,
        before_peak_bytes=before.peak_allocated_bytes,
        after_peak_bytes=after.peak_allocated_bytes,
        peak_change_bytes=after.peak_allocated_bytes - before.peak_allocated_bytes,
        before_peak_reserved_bytes=before.peak_reserved_bytes,
        after_peak_reserved_bytes=after.peak_reserved_bytes,
        peak_reserved_change_bytes=after.peak_reserved_bytes - before.peak_reserved_bytes,
        sites=sites,
    )
