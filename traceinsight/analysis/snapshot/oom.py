"""An out-of-memory error explained: what was asked, what was held, and what change would fit.

The allocator records an ``oom`` event when a request fails after it has already released its
cached blocks and retried: ``size_bytes`` is the request, ``device_free_bytes`` what the driver
said was free then. The request was short by ``request - device_free``. The changes, from the
least to the most intrusive, each offered only when it covers the shortfall:

1. ``expandable_segments:True``, when the memory reserved but free already exceeds the request:
   the allocator held enough, only not in one piece;
2. not keeping the tensors of the site holding the most;
3. activation checkpointing, when sites inside a ``forward`` (and no ``backward``) hold enough;
4. a smaller batch, by the ratio that brings allocated memory down by the shortfall (assuming
   allocated memory scales with the batch, which parameters and optimizer state do not: a lower
   bound on the cut).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.analysis.snapshot.sites import by_site
from traceinsight.analysis.snapshot.units import fmt_bytes


@dataclass(frozen=True)
class OomFix:
    kind: str  # expandable_segments | free_site | checkpointing | smaller_batch
    text: str
    frees_bytes: int  # what it gives back (0 for a setting that only reuses reserved memory)


@dataclass(frozen=True)
class OomResult(Result):
    name: ClassVar[str] = "memory_oom"
    device: int = 0
    ooms: int = 0  # oom events in the trace; the first is explained
    idx: int | None = None
    time_us: int | None = None
    request_bytes: int = 0
    device_free_bytes: int = 0
    # process_cap: the device had room for the request, so a per-process limit refused it
    # (torch.cuda.set_per_process_memory_fraction); device: the device itself (its memory,
    # less what other processes and other allocators hold) had less free than the request
    limit: str = ""
    limit_text: str = ""
    # what the process could hold: reserved + device free, or the cap's upper bound
    limit_bytes: int = 0
    shortfall_bytes: int = 0
    allocated_bytes: int = 0
    reserved_bytes: int = 0
    sites: pl.DataFrame | None = None  # held at the OOM: site, bytes, count, in_forward
    fixes: tuple[OomFix, ...] = ()  # every change that covers the shortfall, least intrusive first
    fix: OomFix | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.sites if self.sites is not None else pl.DataFrame()


def run(replay: DeviceReplay, *, expandable: bool = False) -> OomResult:
    ooms = replay.levels.filter(pl.col("action") == "oom")
    if ooms.is_empty():
        return OomResult(
            available=False, reason="no out-of-memory event in the trace", device=replay.device
        )
    first = ooms.row(0, named=True)
    idx = int(first["idx"])
    device_free = int(first["device_free_bytes"] or 0)
    request = int(first["size_bytes"] or 0)
    allocated, reserved = int(first["allocated_bytes"]), int(first["reserved_bytes"])
    idle = max(reserved - allocated, 0)
    if request <= device_free:
        # The device had room: a cap refused it. The cap lies below reserved + request; the
        # request fits for certain once this much more of what is reserved is free.
        limit, limit_bytes = "process_cap", reserved + request - 1
        shortfall = max(request - idle, 0)
        limit_text = (
            f"a per-process cap (torch.cuda.set_per_process_memory_fraction, or MIG): the device had "
            f"{fmt_bytes(device_free)} free, more than the {fmt_bytes(request)} asked, but this process "
            f"already reserved {fmt_bytes(reserved)} and the cap is below {fmt_bytes(reserved + request)}; "
            f"freeing {fmt_bytes(shortfall)} more is sure to fit"
        )
    else:
        limit, limit_bytes = "device", reserved + device_free
        shortfall = request - device_free
        limit_text = (
            f"the device: {fmt_bytes(device_free)} free (after this process's {fmt_bytes(reserved)} reserved "
            f"and whatever other processes hold) against {fmt_bytes(request)} asked: short by {fmt_bytes(shortfall)}"
        )
    sites = by_site(replay.alive_at(idx))
    fixes = _fixes(request, shortfall, allocated, reserved, sites, expandable)
    return OomResult(
        device=replay.device,
        ooms=ooms.height,
        idx=idx,
        time_us=first["time_us"],
        request_bytes=request,
        device_free_bytes=device_free,
        limit=limit,
        limit_text=limit_text,
        limit_bytes=limit_bytes,
        shortfall_bytes=shortfall,
        allocated_bytes=allocated,
        reserved_bytes=reserved,
        sites=sites,
        fixes=tuple(fixes),
        fix=fixes[0] if fixes else None,
    )


def _fixes(
    request: int,
    shortfall: int,
    allocated: int,
    reserved: int,
    sites: pl.DataFrame,
    expandable: bool,
) -> list[OomFix]:
    fixes: list[OomFix] = []
    idle = reserved - allocated
    if not expandable and idle >= request:
        fixes.append(
            OomFix(
                "expandable_segments",
                f"set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: {fmt_bytes(idle)} was reserved but free, more than the "
                f"{fmt_bytes(request)} asked, only not in one piece",
                0,
            )
        )
    if shortfall == 0:
        return fixes
    named = sites.filter(~pl.col("site").str.starts_with("("))
    if not named.is_empty() and int(named["bytes"][0]) >= shortfall:
        top = named.row(0, named=True)
        fixes.append(
            OomFix(
                "free_site",
                f"free (or do not keep) the tensors allocated at {top['site']}: {fmt_bytes(top['bytes'])} in {top['count']} allocation(s), the shortfall is {fmt_bytes(shortfall)}",
                int(top["bytes"]),
            )
        )
    forward = int(sites.filter(pl.col("in_forward"))["bytes"].sum())
    if forward >= shortfall:
        fixes.append(
            OomFix(
                "checkpointing",
                f"activation checkpointing (torch.utils.checkpoint) on the forward: activations held {fmt_bytes(forward)}, the shortfall is {fmt_bytes(shortfall)}",
                forward,
            )
        )
    if allocated > shortfall:
        ratio = (allocated - shortfall) / allocated
        fixes.append(
            OomFix(
                "smaller_batch",
                f"a batch at most {ratio:.2f}× the current one ({fmt_bytes(allocated)} allocated must lose {fmt_bytes(shortfall)}; "
                "parameters and optimizer state do not shrink with it, so the cut may need to be deeper)",
                shortfall,
            )
        )
    return fixes
