"""Peak allocated and reserved memory of one device, when each was reached, and what was held."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.analysis.snapshot.roles import by_role
from traceinsight.analysis.snapshot.sites import by_site


@dataclass(frozen=True)
class PeakResult(Result):
    """``peak_allocated_bytes`` is reached just after event ``peak_idx`` (None: no trace; then the
    snapshot's own state is the only point known); ``sites`` is what was held then, per site."""

    name: ClassVar[str] = "memory_peak"
    device: int = 0
    events: int = 0
    peak_allocated_bytes: int = 0
    peak_idx: int | None = None
    peak_time_us: int | None = None
    peak_reserved_bytes: int = 0
    peak_reserved_idx: int | None = None
    reserved_at_peak_bytes: int = 0
    end_allocated_bytes: int = 0
    end_reserved_bytes: int = 0
    sites: pl.DataFrame | None = None  # site, bytes, count, in_forward
    roles: pl.DataFrame | None = None  # role, bytes, count (see roles.py)

    def to_polars(self) -> pl.DataFrame:
        return self.sites if self.sites is not None else pl.DataFrame()


def run(replay: DeviceReplay) -> PeakResult:
    levels = replay.levels
    if levels.is_empty():
        alive = replay.alive_at(None)
        return PeakResult(
            device=replay.device,
            peak_allocated_bytes=replay.end_allocated_bytes,
            peak_reserved_bytes=replay.end_reserved_bytes,
            reserved_at_peak_bytes=replay.end_reserved_bytes,
            end_allocated_bytes=replay.end_allocated_bytes,
            end_reserved_bytes=replay.end_reserved_bytes,
            sites=by_site(alive),
            roles=_roles(alive),
        )
    # arg_max gives the first row at the maximum: the moment the peak was first reached.
    top = levels.row(int(levels["allocated_bytes"].arg_max() or 0), named=True)
    top_reserved = levels.row(int(levels["reserved_bytes"].arg_max() or 0), named=True)
    # Before the first event the level was the starting one, which can be the highest of all.
    peak_idx: int | None = top["idx"]
    peak_bytes = int(top["allocated_bytes"])
    if replay.start_allocated_bytes > peak_bytes:
        peak_idx, peak_bytes = -1, replay.start_allocated_bytes
    held = replay.alive_at(peak_idx)
    return PeakResult(
        device=replay.device,
        events=levels.height,
        peak_allocated_bytes=peak_bytes,
        peak_idx=peak_idx,
        peak_time_us=top["time_us"] if peak_idx == top["idx"] else None,
        peak_reserved_bytes=max(int(top_reserved["reserved_bytes"]), replay.start_reserved_bytes),
        peak_reserved_idx=top_reserved["idx"],
        reserved_at_peak_bytes=int(top["reserved_bytes"])
        if peak_idx == top["idx"]
        else replay.start_reserved_bytes,
        end_allocated_bytes=replay.end_allocated_bytes,
        end_reserved_bytes=replay.end_reserved_bytes,
        sites=by_site(held),
        roles=_roles(held),
    )


def _roles(held: pl.DataFrame) -> pl.DataFrame | None:
    return by_role(held) if "role" in held.columns else None
