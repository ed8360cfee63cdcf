"""Fragmentation: memory the allocator reserved but could not hand out as one piece.

The layout is the one at the out-of-memory error when the trace has one (rebuilt from the trace,
see ``layout.py``), else the one dumped. The caching allocator splits segments into blocks; freed blocks stay reserved (``inactive``)
and only serve requests that fit in one of them. Reserved minus allocated is the memory held
idle; the largest inactive block against the largest request says whether that idle memory is
usable. Whether another allocator setting would reserve less is not read from the layout (a
free block that fits the largest request says nothing of the segments the run reserved on the
way): it comes from replaying the allocator over the trace (``whatif.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.layout import layout_at
from traceinsight.analysis.snapshot.oom import OomResult
from traceinsight.analysis.snapshot.peak import PeakResult
from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.analysis.snapshot.units import fmt_bytes
from traceinsight.analysis.snapshot.whatif import WhatIfResult
from traceinsight.trace.snapshot.model import MemorySnapshot


@dataclass(frozen=True)
class FragmentationResult(Result):
    name: ClassVar[str] = "memory_fragmentation"
    device: int = 0
    moment: str = ""  # when the layout below is from: the out-of-memory error, else the dump
    segments: int = 0
    reserved_bytes: int = 0
    allocated_bytes: int = 0
    reserved_free_bytes: int = 0  # reserved minus allocated
    reserved_free_at_peak_bytes: int = 0  # the same, when allocated memory peaked
    inactive_blocks: int = (
        0  # free blocks of split segments (a segment of one free block is not split)
    )
    inactive_bytes: int = 0
    largest_inactive_bytes: int = 0
    # the largest allocation (or failed request) in the trace, or block held
    largest_request_bytes: int = 0
    inactive_tails: int = 0  # split segments whose last block is inactive
    inactive_tail_bytes: int = 0
    expandable: bool = False  # segments already expandable (or the setting says so)
    expandable_would_help: bool = False
    advice: str = ""


def run(
    snapshot: MemorySnapshot,
    replay: DeviceReplay,
    peak: PeakResult,
    oom: OomResult | None = None,
    whatif: WhatIfResult | None = None,
) -> FragmentationResult:
    """At the out-of-memory error when there is one (rebuilt from the trace), else as dumped."""
    device = replay.device
    segments = snapshot.segments.filter(pl.col("device") == device)
    blocks = snapshot.blocks.filter(pl.col("device") == device)
    moment = "when the snapshot was taken"
    if oom is not None and oom.available and oom.idx is not None:
        rebuilt = layout_at(snapshot, replay, oom.idx)
        if rebuilt is not None:
            segments, blocks = rebuilt
            moment = f"at the out-of-memory error (event #{oom.idx:,})"
    if segments.is_empty():
        return FragmentationResult(
            available=False, reason="the snapshot holds no segments for this device", device=device
        )
    per_segment = blocks.group_by("segment_id").agg(
        pl.len().alias("n"), pl.col("block_index").max().alias("last")
    )
    marked = blocks.join(per_segment, on="segment_id").with_columns(
        ((pl.col("state") == "inactive") & (pl.col("n") > 1)).alias("split_free"),
    )
    split_free = marked.filter(pl.col("split_free"))
    tails = split_free.filter(pl.col("block_index") == pl.col("last"))
    held = blocks.filter(pl.col("state") != "inactive")
    # A request that failed (oom) is a request too, and the one fragmentation matters most for.
    events = snapshot.events.filter(
        (pl.col("device") == device) & pl.col("action").is_in(["alloc", "oom"])
    )
    largest_request = max(int(events["size_bytes"].max() or 0), int(held["size_bytes"].max() or 0))  # type: ignore[arg-type]
    reserved = int(segments["total_size_bytes"].sum())
    allocated = int(held["size_bytes"].sum())
    free = reserved - allocated
    largest_free = int(blocks.filter(pl.col("state") == "inactive")["size_bytes"].max() or 0)  # type: ignore[arg-type]
    tail_bytes = int(tails["size_bytes"].sum())
    expandable = expandable_on(snapshot, device)
    if whatif is not None and whatif.available:
        # What decides it is the allocator's own replay, not the layout at one moment.
        helps = not expandable and whatif.best_settings.startswith("expandable_segments:True")
        advice = whatif.advice
    else:
        helps = False
        advice = _advice(free, largest_free, largest_request, expandable)
    return FragmentationResult(
        device=device,
        moment=moment,
        segments=segments.height,
        reserved_bytes=reserved,
        allocated_bytes=allocated,
        reserved_free_bytes=free,
        reserved_free_at_peak_bytes=max(peak.reserved_at_peak_bytes - peak.peak_allocated_bytes, 0),
        inactive_blocks=split_free.height,
        inactive_bytes=int(split_free["size_bytes"].sum()),
        largest_inactive_bytes=largest_free,
        largest_request_bytes=largest_request,
        inactive_tails=tails.height,
        inactive_tail_bytes=tail_bytes,
        expandable=expandable,
        expandable_would_help=helps,
        advice=advice,
    )


def expandable_on(snapshot: MemorySnapshot, device: int) -> bool:
    """Whether the device's segments are expandable already (or the allocator setting says so)."""
    dumped = snapshot.segments.filter(pl.col("device") == device)
    return bool(dumped["is_expandable"].fill_null(False).any()) or _setting_on(
        snapshot.allocator_settings
    )


def _setting_on(settings: dict[str, Any]) -> bool:
    value = settings.get("expandable_segments")
    return value is True or (
        isinstance(settings.get("PYTORCH_CUDA_ALLOC_CONF"), str)
        and "expandable_segments:true"
        in str(settings["PYTORCH_CUDA_ALLOC_CONF"]).replace(" ", "").lower()
    )


def _advice(free: int, largest_free: int, largest_request: int, expandable: bool) -> str:
    """Without a trace to replay, only what the layout shows: no prediction."""
    if free <= 0:
        return "no reserved memory is idle"
    setting = "segments are expandable" if expandable else "no trace to replay the allocator over"
    return (
        f"{fmt_bytes(free)} reserved but free; largest free block {fmt_bytes(largest_free)}, "
        f"largest request {fmt_bytes(largest_request)} ({setting}: no prediction of other settings)"
    )
