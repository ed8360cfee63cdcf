"""An out-of-memory error explained: what was asked, what was held, and what change would fit.

The allocator records an ``oom`` event when a request fails after it has already released its
cached blocks and retried: ``size_bytes`` is the request, ``device_free_bytes`` what the driver
said was free then. The request was short by ``request - device_free``. The changes, from the
least to the most intrusive, each with the memory it frees (``covers``: enough on its own):

1. an allocator setting, when the replay of the trace under it does not run out under the same
   limit (fragmentation caused it; see ``whatif.py``), or else ``expandable_segments:True`` when
   the memory reserved but free already exceeds the request;
2. freeing what is kept from earlier iterations (the ``kept`` role, by site: a leak, a cache);
3. activation checkpointing of the site holding the most activations saved for backward;
4. a smaller batch: assuming activation and temporary memory proportional to the batch (and
   nothing else shrinking with it), batch × (1 - shortfall / their bytes), rounded down.
Without roles (no stack names a phase), the site holding the most is offered instead of
what is kept, activations are the memory of sites inside a ``forward`` and the batch cut is
taken over all allocated memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.analysis.snapshot.roles import by_role
from traceinsight.analysis.snapshot.sites import by_site
from traceinsight.analysis.snapshot.units import fmt_bytes
from traceinsight.analysis.snapshot.whatif import WhatIfResult


@dataclass(frozen=True)
class OomFix:
    kind: str  # expandable_segments | free_site | checkpointing | smaller_batch
    text: str
    frees_bytes: int  # what it gives back (a setting: the reserved-but-free memory it makes usable)
    covers: bool = True  # frees at least the shortfall on its own


@dataclass(frozen=True)
class OomResult(Result):
    name: ClassVar[str] = "memory_oom"
    device: int = 0
    ooms: int = 0  # oom events in the trace; the last (the one raised) is explained
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
    sites: pl.DataFrame | None = None  # held at the OOM: site, bytes, count, in_forward, role
    roles: pl.DataFrame | None = None  # held at the OOM: role, bytes, count
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
    # The last one is the error that reached the program: earlier ones were caught and retried
    # (cuDNN tries smaller workspaces when one does not fit; a program may retry a smaller batch).
    first = ooms.row(ooms.height - 1, named=True)
    idx = int(first["idx"])
    device_free = int(first["device_free_bytes"] or 0)
    request = int(first["size_bytes"] or 0)
    allocated, reserved = int(first["allocated_bytes"]), int(first["reserved_bytes"])
    idle = max(reserved - allocated, 0)
    if request <= device_free:
        # The device had room: a cap refused it. The cap lies below reserved + request; the
        # request fits for certain once this much more of what is reserved is free.
        # Replayed under the lowest cap possible (the most this process was ever granted): a
        # setting said to avoid the error must avoid it under any cap the snapshot allows.
        granted = int(replay.levels.filter(pl.col("idx") <= idx)["reserved_bytes"].max() or 0)  # type: ignore[arg-type]
        limit, limit_bytes = "process_cap", max(granted, reserved)
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
    held = replay.alive_at(idx)
    sites = by_site(held)
    if "role" in held.columns:
        # the role holding most of each site's memory at the error
        main_role = (
            held.group_by("site", "role")
            .agg(pl.col("size_bytes").sum())
            .sort(["size_bytes", "role"], descending=[True, False])
            .group_by("site", maintain_order=True)
            .first()
            .select("site", "role")
        )
        sites = sites.join(main_role, on="site", how="left", maintain_order="left")
    fixes = _fixes(request, shortfall, allocated, reserved, held, expandable)
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
        roles=by_role(held) if "role" in held.columns else None,
        fixes=tuple(fixes),
        fix=next((f for f in fixes if f.covers), None),
    )


def _fixes(
    request: int,
    shortfall: int,
    allocated: int,
    reserved: int,
    held: pl.DataFrame,
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
                idle,
                covers=True,
            )
        )
    if shortfall == 0:
        return fixes
    roles = "role" in held.columns and bool((held["role"] != "unknown").any())
    kept = _top_site(held.filter(pl.col("role") == "kept")) if roles else None
    if not roles:
        named = held.filter(pl.col("site").is_not_null() & ~pl.col("site").str.starts_with("("))
        top_named = _top_site(named)
        if top_named is not None and top_named[1] >= shortfall:
            site, site_bytes, count = top_named
            fixes.append(
                OomFix(
                    "free_site",
                    f"free (or do not keep) the tensors allocated at {site}: {fmt_bytes(site_bytes)} in {count} allocation(s), "
                    f"the shortfall is {fmt_bytes(shortfall)}",
                    site_bytes,
                )
            )
    if kept is not None:
        site, kept_bytes, count = kept
        fixes.append(
            OomFix(
                "free_kept",
                f"free what is kept from earlier iterations at {site}: {fmt_bytes(kept_bytes)} in {count} allocation(s) "
                f"still held at the error, made in earlier iterations (the shortfall is {fmt_bytes(shortfall)})",
                kept_bytes,
                covers=kept_bytes >= shortfall,
            )
        )
    activations = (
        held.filter(pl.col("role") == "activation") if roles else held.filter(pl.col("in_forward"))
    )
    top = _top_site(activations)
    if top is not None:
        site, act_bytes, count = top
        fixes.append(
            OomFix(
                "checkpointing",
                f"activation checkpointing (torch.utils.checkpoint) of the forward at {site}: its activations saved for backward held "
                f"{fmt_bytes(act_bytes)} in {count} allocation(s); recomputing them in backward frees up to that "
                f"(the shortfall is {fmt_bytes(shortfall)})",
                act_bytes,
                covers=act_bytes >= shortfall,
            )
        )
    scaling = (
        int(held.filter(pl.col("role").is_in(["activation", "temporary"]))["size_bytes"].sum())
        if roles
        else allocated
    )
    if scaling > shortfall:
        # Rounded down: the batch given must fit under the assumption, not nearly fit.
        ratio = math.floor((scaling - shortfall) / scaling * 100) / 100
        what = (
            f"assuming activation and temporary memory proportional to the batch: they held {fmt_bytes(scaling)} "
            f"of the {fmt_bytes(allocated)} allocated and must lose {fmt_bytes(shortfall)}; parameters, gradients "
            "and optimizer state do not shrink"
            if roles
            else f"assuming all {fmt_bytes(allocated)} allocated proportional to the batch (no roles known), it must "
            f"lose {fmt_bytes(shortfall)}; parameters and optimizer state do not shrink with it, so the cut may "
            "need to be deeper"
        )
        fixes.append(
            OomFix(
                "smaller_batch",
                f"a smaller batch: batch × {ratio:.2f} or smaller ({1 - ratio:.0%} less at least; {what}; what the rest "
                "of the failed step would have needed is not in the trace, so the cut may need to be deeper)",
                shortfall,
                covers=True,
            )
        )
    elif roles:
        fixes.append(
            OomFix(
                "smaller_batch",
                f"no smaller batch fits: activations and temporaries held {fmt_bytes(scaling)}, less than the "
                f"{fmt_bytes(shortfall)} short; the rest held does not shrink with the batch (taking activation "
                "and temporary memory as proportional to the batch)",
                scaling,
                covers=False,
            )
        )
    return fixes


def _top_site(held: pl.DataFrame) -> tuple[str, int, int] | None:
    """The site holding the most of ``held``, with its bytes and allocations."""
    if held.is_empty():
        return None
    top = by_site(held).row(0, named=True)
    return str(top["site"]), int(top["bytes"]), int(top["count"])


def with_allocator_fix(result: OomResult, whatif: WhatIfResult) -> OomResult:
    """The OOM's fixes with the allocator setting the replay says would not have run out
    first (fragmentation caused the error), when the replay follows the trace."""
    if not result.available or not whatif.best_settings or not whatif.limit_bytes:
        return result
    runs = whatif.runs
    if runs is None:
        return result
    best = runs.filter(pl.col("settings") == whatif.best_settings)
    if best.is_empty() or int(best["ooms"][0]) > 0:
        return result
    idle = max(result.reserved_bytes - result.allocated_bytes, 0)
    fix = OomFix(
        "allocator_setting",
        f"set PYTORCH_CUDA_ALLOC_CONF={whatif.best_settings}: the trace replayed under it does not run out under the same "
        f"limit ({fmt_bytes(int(best['peak_reserved_bytes'][0]))} reserved at its peak); fragmentation caused this error, "
        f"{fmt_bytes(idle)} was reserved but free when it came",
        idle,
        covers=True,
    )
    others = tuple(f for f in result.fixes if f.kind != "expandable_segments")
    fixes = (fix, *others)
    return replace(result, fixes=fixes, fix=fixes[0])
