"""Every answer for one snapshot and one device, in one result."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import polars as pl

from traceinsight.analysis.core.base import RESULT_SCHEMA_VERSION, Result, jsonable
from traceinsight.analysis.snapshot.compare import SnapshotCompareResult
from traceinsight.analysis.snapshot.compare import run as compare_peaks
from traceinsight.analysis.snapshot.fragmentation import FragmentationResult, expandable_on
from traceinsight.analysis.snapshot.fragmentation import run as run_fragmentation
from traceinsight.analysis.snapshot.leaks import LeaksResult, find_iterations
from traceinsight.analysis.snapshot.leaks import run as run_leaks
from traceinsight.analysis.snapshot.oom import OomResult, with_allocator_fix
from traceinsight.analysis.snapshot.oom import run as run_oom
from traceinsight.analysis.snapshot.peak import PeakResult
from traceinsight.analysis.snapshot.peak import run as run_peak
from traceinsight.analysis.snapshot.replay import default_device, replay
from traceinsight.analysis.snapshot.roles import with_roles
from traceinsight.analysis.snapshot.sites import sites
from traceinsight.analysis.snapshot.timeline import Timeline, timeline
from traceinsight.analysis.snapshot.whatif import WhatIfResult, recorded_settings
from traceinsight.analysis.snapshot.whatif import run as run_whatif
from traceinsight.errors import UsageError
from traceinsight.trace.snapshot.model import MemorySnapshot


@dataclass(frozen=True)
class SnapshotReport(Result):
    """Peak, leaks, fragmentation and the OOM of one device of a snapshot (and, when asked, the
    comparison with a second snapshot). ``timeline`` feeds the HTML plot and is not in ``to_dict``."""

    name: ClassVar[str] = "memory_snapshot"
    path: str = ""
    file_bytes: int = 0
    layout: str = "current"
    device: int = 0
    devices: tuple[int, ...] = ()
    events: int = 0
    first_time_us: int | None = None  # the first traced event's time, for times relative to it
    stacks: int = 0
    peak: PeakResult = field(default_factory=PeakResult)
    leaks: LeaksResult = field(default_factory=LeaksResult)
    fragmentation: FragmentationResult = field(default_factory=FragmentationResult)
    allocator: WhatIfResult = field(default_factory=WhatIfResult)
    oom: OomResult = field(default_factory=OomResult)
    compare: SnapshotCompareResult | None = None
    timeline: Timeline | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION}
        for f in fields(self):
            if f.name != "timeline":  # drawing points, not a finding
                data[f.name] = jsonable(getattr(self, f.name))
        return data

    def to_polars(self) -> pl.DataFrame:
        return self.peak.to_polars()


def analyze_snapshot(
    snapshot: MemorySnapshot,
    *,
    device: int | None = None,
    iterations: int | None = None,
    compare_with: MemorySnapshot | None = None,
    points: int = 300,
) -> SnapshotReport:
    """Every answer for ``device`` (default: the one with the most events)."""
    chosen = default_device(snapshot) if device is None else device
    known = snapshot.devices
    if device is not None and known and device not in known:
        raise UsageError(
            f"{snapshot.path} has no device {device}; it has {', '.join(map(str, known))}"
        )
    site_table = sites(snapshot)
    replayed = replay(snapshot, chosen, site_table)
    bounds, method, loop_start = find_iterations(replayed, iterations)
    if iterations is None and "equal slices" in method:
        bounds = []  # slices of time are not iterations: no memory is said to outlive one
    replayed = dataclasses.replace(
        replayed, allocations=with_roles(replayed, snapshot, bounds, loop_start=loop_start)
    )
    peak_result = run_peak(replayed)
    oom_result = run_oom(replayed, expandable=expandable_on(snapshot, chosen))
    expandable = expandable_on(snapshot, chosen)
    limit = oom_result.limit_bytes if oom_result.available else None
    allocator = run_whatif(snapshot, replayed, expandable, limit)
    oom_result = with_allocator_fix(oom_result, allocator)
    frag = run_fragmentation(snapshot, replayed, peak_result, oom_result, allocator)
    compared = None
    if compare_with is not None:
        other_device = default_device(compare_with) if device is None else device
        other_peak = run_peak(replay(compare_with, other_device, sites(compare_with)))
        compared = compare_peaks(
            snapshot.path,
            peak_result,
            compare_with.path,
            other_peak,
            before_settings=_settings(snapshot, chosen),
            after_settings=_settings(compare_with, other_device),
        )
    return SnapshotReport(
        path=snapshot.path,
        file_bytes=snapshot.file_bytes,
        layout=snapshot.layout,
        device=chosen,
        devices=tuple(known),
        events=replayed.levels.height,
        first_time_us=replayed.levels["time_us"].min() if replayed.levels.height else None,  # type: ignore[arg-type]
        stacks=site_table.height,
        peak=peak_result,
        leaks=run_leaks(replayed, iterations),
        fragmentation=frag,
        allocator=allocator,
        oom=oom_result,
        compare=compared,
        timeline=timeline(replayed, peak_result.sites, points=points),
    )


def _settings(snapshot: MemorySnapshot, device: int) -> str:
    return recorded_settings(snapshot.allocator_settings, expandable_on(snapshot, device)).label()
