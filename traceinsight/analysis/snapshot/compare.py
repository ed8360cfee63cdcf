"""Two snapshots compared: the change of peak memory and of what each site held at the peak."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
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
    # what tells the two runs apart: the allocator settings when they differ, else the part of
    # the paths that differs; ``title`` says it in one line
    before_label: str = ""
    after_label: str = ""
    differs_by: str = ""
    title: str = ""
    before_peak_bytes: int = 0
    after_peak_bytes: int = 0
    peak_change_bytes: int = 0
    before_peak_reserved_bytes: int = 0
    after_peak_reserved_bytes: int = 0
    peak_reserved_change_bytes: int = 0
    sites: pl.DataFrame | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.sites if self.sites is not None else pl.DataFrame()


def labels(
    before_path: str, after_path: str, before_settings: str, after_settings: str
) -> tuple[str, str, str]:
    """The two runs' labels and what they differ by: the allocator settings when they differ,
    else what is left of the two paths once the parts they share at both ends are cut
    (``runs/lm_default.pickle.gz`` and ``runs/lm_expandable.pickle.gz``: default, expandable)."""
    if before_settings != after_settings:
        return before_settings, after_settings, "allocator settings"
    a = [t for t in re.split(r"[/\\_.\-]+", before_path) if t]
    b = [t for t in re.split(r"[/\\_.\-]+", after_path) if t]
    while a and b and a[0] == b[0]:
        a, b = a[1:], b[1:]
    while a and b and a[-1] == b[-1]:
        a, b = a[:-1], b[:-1]
    if not a and not b:
        return before_path, after_path, "nothing in their names (the same file)"
    return "_".join(a) or "(shorter name)", "_".join(b) or "(shorter name)", "file name"


def run(
    before_path: str,
    before: PeakResult,
    after_path: str,
    after: PeakResult,
    *,
    before_settings: str = "",
    after_settings: str = "",
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
    left_label, right_label, differs_by = labels(
        before_path, after_path, before_settings, after_settings
    )
    return SnapshotCompareResult(
        before_path=before_path,
        after_path=after_path,
        before_label=left_label,
        after_label=right_label,
        differs_by=differs_by,
        title=f"{left_label} vs {right_label} ({differs_by}: {Path(before_path).name} vs {Path(after_path).name})",
        before_peak_bytes=before.peak_allocated_bytes,
        after_peak_bytes=after.peak_allocated_bytes,
        peak_change_bytes=after.peak_allocated_bytes - before.peak_allocated_bytes,
        before_peak_reserved_bytes=before.peak_reserved_bytes,
        after_peak_reserved_bytes=after.peak_reserved_bytes,
        peak_reserved_change_bytes=after.peak_reserved_bytes - before.peak_reserved_bytes,
        sites=sites,
    )
