"""Findings about device idle time and its host-side causes, read from the gaps analysis:
data loading, synchronisation, launch overhead, allocator calls."""

from __future__ import annotations

import re

import polars as pl

from traceinsight.analysis.findings.detect.advice import host_work_advice, sync_advice
from traceinsight.analysis.findings.model import (
    Evidence,
    OpEvidence,
    Pool,
    RegionEvidence,
)
from traceinsight.analysis.findings.price.alloc_cost import allocating_ops, warm_allocations
from traceinsight.analysis.findings.price.fixes import exact_names, no_host_time_in
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.collectives import BACKEND_SPAN, C10D_OP
from traceinsight.analysis.findings.read.context import DYNAMO_INTERNAL, FindingContext
from traceinsight.analysis.findings.read.syncs import blocking_spans
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import ALLOCATOR_CALLS
from traceinsight.analysis.sections.breakdown import busy_intervals
from traceinsight.analysis.whatif.copies import ShrinkOwnTime
from traceinsight.analysis.whatif.transforms import Remove

SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::tolist",
    "aten::cpu",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::masked_select",
    "aten::unique",
)
# Host spans of a collective (a backend's "gloo:all_reduce", the dispatcher's "c10d::allreduce_").
COLLECTIVE_SPANS = f"{BACKEND_SPAN}|{C10D_OP}"
# What removing the synchronisations removes: the ops that read a device value on the host
# and the explicit synchronize calls (stream, device, event).
SYNC_CALLS = r"^(aten::item|aten::_local_scalar_dense|aten::nonzero|aten::tolist)$|^(cuda|hip|cu)\w*Synchronize$"


def _culprits(ctx: FindingContext, cause: str, limit: int = 5) -> pl.DataFrame:
    if ctx.gaps is None:
        return pl.DataFrame()
    return (
        ctx.gaps.culprits.filter(
            (pl.col("cause") == cause) & ~pl.col("culprit").str.contains(DYNAMO_INTERNAL.pattern)
        )
        .sort(["idle_ns", "culprit"], descending=[True, False])
        .head(limit)
    )


def _gap_counts(ctx: FindingContext, cause: str) -> int:
    if ctx.gaps is None:
        return 0
    return int(ctx.gaps.by_cause.filter(pl.col("cause") == cause)["gaps"].sum())


def detect_dataloader_stall(ctx: FindingContext) -> Estimate | None:
    idle = ctx.idle_by_cause("data_loading")
    if idle <= 0:
        return None
    culprits = _culprits(ctx, "data_loading")
    names = [str(n) for n in culprits["culprit"].to_list()]
    workers = any("MultiProcessing" in n for n in names)
    fix = action = None
    figures: tuple[tuple[str, float], ...] = (("data_loading_idle_ns", float(idle)),)
    transforms = no_host_time_in(
        str(n) for n in _culprits(ctx, "data_loading", limit=1_000)["culprit"].to_list()
    )
    if workers:
        fix, short = _workers_fix(ctx, idle)
        figures = (*figures, *short)
        if dict(short)["loading_speedup_needed"] >= WORKERS_CANNOT_FIX:
            action = "cheaper per-batch CPU work (GPU-side augmentation, cached decoded data)"
        # N workers that each take longer than N steps hand their batches over in bursts:
        # the waits land on one step in N, so the median step a replay prices may hold none.
        # The window's idle is the loss over the steps recorded.
        transforms = ()
    return estimate(
        ctx,
        "dataloader_stall",
        {"idle": idle},
        # every loading span off the step's path, not only the five listed
        transforms=transforms,
        confidence="high" if names else "medium",
        confidence_reason=f"{_gap_counts(ctx, 'data_loading')} idle gaps while the host was inside the DataLoader",
        method="device idle time in gaps the host spent loading data: parallel loading that keeps "
        "ahead of the step removes all of it (at most; the loader must then be fast enough)",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=n, calls=int(g), dur_ns=int(i))
                for n, g, i in zip(
                    names, culprits["gaps"].to_list(), culprits["idle_ns"].to_list(), strict=True
                )
            ),
            locations=ctx.locations_of(["enumerate(DataLoader)"]),
            figures=figures,
        ),
        fix=fix,
        action=action,
    )


# Loading this many times too slow is past what more workers fix on a usual machine (8 to 16
# cores per GPU, workers already running): the per-batch work itself must get cheaper.
WORKERS_CANNOT_FIX = 4.0


def _workers_fix(ctx: FindingContext, idle_ns: int) -> tuple[str, tuple[tuple[str, float], ...]]:
    """Advice for worker processes that do not keep up, from which side is short: the workers
    deliver a batch every window / steps, the step without its waits needs that less the
    waits; loading must get their ratio faster. The trace does not record num_workers."""
    steps = max(ctx.step_count, 1)
    period_ns = ctx.window_ns / steps
    need_ns = max(period_ns - idle_ns / steps, 1.0)
    factor = period_ns / need_ns
    head = (
        f"The DataLoader's worker processes deliver one batch every {period_ns / 1e6:.1f} ms while "
        f"the step itself needs {need_ns / 1e6:.1f} ms: loading must get {factor:.1f}x faster. "
    )
    if factor >= WORKERS_CANNOT_FIX:
        tail = (
            f"More workers fix that only if num_workers x {factor:.1f} fits in the CPU cores per GPU; "
            "past that, make each batch's CPU work cheaper: run the augmentation on the GPU on "
            "whole batches (torchvision.transforms.v2 on CUDA tensors, DALI), cache decoded or "
            "pre-resized samples, use a faster decoder, keep pin_memory=True."
        )
    else:
        tail = (
            f"Raise num_workers about {factor:.1f}x (within the CPU cores per GPU) and "
            "prefetch_factor, with persistent_workers=True and pin_memory=True; cheaper "
            "per-sample work (GPU augmentation, cached decoded data) also closes it."
        )
    return head + tail, (("batch_period_ns", period_ns), ("step_need_ns", need_ns), ("loading_speedup_needed", factor))


def _in_collective() -> pl.Expr:
    return pl.col("culprit").fill_null("").str.contains(COLLECTIVE_SPANS)


# The ops that read a device value on the host, by what the user's code did: the op that
# called the sync (its parent) tells boolean indexing from .item() in control flow or logging.
SYNC_CAUSES: tuple[tuple[str, str, str], ...] = (
    (
        r"^aten::(index|masked_select|nonzero|argwhere|unique|_unique2|masked_scatter)",
        "boolean indexing ({op}) waits for the GPU {n} times per step to learn the result's size",
        "Keep shapes fixed: instead of x[mask] use torch.where(mask, x, 0) or masked_fill, and for a "
        "loss over some positions set the others' labels to the ignore index "
        "(labels.masked_fill(~mask, -100); cross_entropy(..., ignore_index=-100)).",
    ),
    (
        r"^aten::(item|_local_scalar_dense|is_nonzero)",
        ".item() / a tensor in Python control flow ({op}) waits for the GPU {n} times per step",
        "Keep the value on the GPU: no .item() per step; accumulate losses and metrics as tensors and "
        "read them every N steps; branch with torch.where instead of `if tensor:`; log asynchronously.",
    ),
    (
        r"^aten::(tolist|cpu|to|_to_copy|copy_)",
        "a copy to the host ({op}: .cpu() / .tolist() / .numpy()) waits for the GPU {n} times per step",
        "Copy less often and without waiting: keep the values on the GPU until needed, or copy into "
        "pinned memory with non_blocking=True and read them after a later event.",
    ),
)


def _sync_cause(ev: pl.DataFrame, per_step: int) -> tuple[str | None, str | None]:
    """The title and fix naming what caused most syncs: the outermost op around each
    ``_local_scalar_dense`` / ``nonzero`` call (``.item()``, boolean-mask ``index``, ...)."""
    name = pl.col("name").cast(pl.String)
    ops = ev.filter(pl.col("kind") == "cpu_op").select("id", "parent", name.alias("name"))
    leaf = ops.filter(pl.col("name").is_in(["aten::_local_scalar_dense", "aten::nonzero"]))
    if leaf.height == 0:
        return None, None
    # climb to the outermost op (a chain of at most a few levels: index → nonzero)
    cur = leaf.select(pl.col("id").alias("leaf"), "parent", "name")
    for _ in range(4):
        up = cur.join(ops.rename({"id": "parent", "parent": "up", "name": "up_name"}), on="parent", how="left")
        cur = up.select(
            "leaf",
            pl.when(pl.col("up_name").is_not_null()).then(pl.col("up")).otherwise(None).alias("parent"),
            pl.coalesce("up_name", "name").alias("name"),
        )
    counts = cur.group_by("name").len().sort(["len", "name"], descending=[True, False])
    op, n = str(counts["name"][0]), int(counts["len"][0])
    for pattern, title, fix in SYNC_CAUSES:
        if re.search(pattern, op):
            return "The host waits for the GPU: " + title.format(op=op, n=f"{n / max(per_step, 1):.0f}"), fix
    return None, None


def detect_host_sync(ctx: FindingContext) -> Estimate | None:
    # A collective's own syncs (gloo staging CUDA tensors through host memory) are not the
    # loop's: the communication findings say how to cut them.
    opened = ctx.sync_gaps.filter(~_in_collective())
    # Gaps the host spent in a sync that did not open them (waiting on other work): all of it.
    waited = (
        pl.DataFrame()
        if ctx.gaps is None
        else ctx.gaps.gaps.filter((pl.col("cause") == "sync") & ~_in_collective()).join(
            ctx.sync_gaps.select("device", "start_ns"), on=["device", "start_ns"], how="anti"
        )
    )
    opened_ns = int(opened["saving_ns"].sum())
    waited_ns = int(waited["dur_ns"].sum()) if waited.height else 0
    gap_idle = int(opened["dur_ns"].sum()) + waited_ns
    if gap_idle <= 0:
        return None
    # Removing the syncs frees the host for as long as it was blocked in them, no longer.
    blocked = int(blocking_spans(ctx.trace)["blocked_ns"].sum())
    idle = min(opened_ns + waited_ns, blocked)
    scale = idle / (opened_ns + waited_ns) if opened_ns + waited_ns else 0.0
    # Idle after a sync spent launching or loading data is also what launch_bound and
    # dataloader_stall report (their fixes shrink it without removing the sync): counted
    # once, here. host_bound does not count gaps a sync opened at all (see detect_host_bound).
    launching = opened.filter(
        (pl.col("cause") == "launch_overhead")
        & ~pl.col("culprit").fill_null("").str.contains(DYNAMO_INTERNAL.pattern)
    )
    loading = opened.filter(pl.col("cause") == "data_loading")
    parts: tuple[tuple[Pool, str, int], ...] = (
        ("idle", "launch_bound", int(int(launching["saving_ns"].sum()) * scale)),
        ("idle", "dataloader_stall", int(int(loading["saving_ns"].sum()) * scale)),
    )
    culprits = (
        pl.concat([opened.select("culprit", "dur_ns"), waited.select("culprit", "dur_ns")])
        if waited.height
        else opened.select("culprit", "dur_ns")
    )
    culprits = (
        culprits.filter(
            pl.col("culprit").is_not_null()
            & ~pl.col("culprit").str.contains(DYNAMO_INTERNAL.pattern)
        )
        .group_by("culprit")
        .agg(pl.col("dur_ns").sum().alias("idle_ns"), pl.len().alias("gaps"))
        .sort(["idle_ns", "culprit"], descending=[True, False])
        .head(5)
    )
    n_gaps = opened.height + waited.height
    ev = ctx.trace.events
    name = pl.col("name").cast(pl.String)
    per_step = max(ctx.step_count, 1)
    calls = (
        ev.filter(
            (pl.col("kind") == "cpu_op")
            & name.is_in(["aten::item", "aten::_local_scalar_dense", "aten::nonzero"])
        )
        .group_by(name.alias("name"))
        .agg(
            pl.len().alias("calls"),
            pl.col("dur_ns").sum(),
            pl.col("input_dims").first(),
            pl.col("input_types").first(),
        )
        .sort(["calls", "name"], descending=[True, False])
    )
    syncs = (
        ev.filter(pl.col("kind").is_in(["runtime", "driver"]) & name.str.contains(r"Synchronize"))
        .group_by(name.alias("name"))
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "name"], descending=[True, False])
    )
    ops = tuple(
        OpEvidence(
            name=r["name"],
            shapes=r["input_dims"],
            dtypes=r["input_types"],
            calls=int(r["calls"]),
            dur_ns=int(r["dur_ns"]),
        )
        for r in calls.iter_rows(named=True)
    )
    regions = tuple(
        RegionEvidence(name=str(r["culprit"]), calls=int(r["gaps"]), dur_ns=int(r["idle_ns"]))
        for r in culprits.iter_rows(named=True)
    ) + tuple(
        RegionEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
        for r in syncs.iter_rows(named=True)
    )
    n_item = int(calls["calls"].sum()) if calls.height else 0
    title, fix = _sync_cause(ev, per_step)
    return estimate(
        ctx,
        "host_sync",
        {"idle": idle},
        title=title,
        transforms=(Remove(SYNC_CALLS, keep_inside=COLLECTIVE_SPANS),),
        # Inference and serving have no losses or labels: their own text (the title still names the op).
        fix=sync_advice(ctx.workload) or fix,
        within_parts=parts,
        confidence="high" if culprits.height else "medium",
        confidence_reason=f"{n_gaps} idle gaps opened by synchronising calls; "
        f"{n_item / per_step:.0f} .item()/nonzero-style calls per step",
        method="per idle gap that begins when a synchronising call returns (the GPU drained, and "
        "stays idle whatever the host does next) or while the host waits in one: the shorter of "
        "the gap and the host time blocked in that call, which the host would otherwise have "
        "spent ahead of the GPU; in all, at most the host time blocked in synchronising calls",
        evidence=Evidence(
            ops=ops,
            regions=regions,
            locations=ctx.locations_of(
                [
                    "aten::item",
                    "aten::_local_scalar_dense",
                    "aten::nonzero",
                    *[str(c) for c in culprits["culprit"].to_list()],
                ]
            ),
            figures=(
                ("sync_idle_ns", float(gap_idle)),
                ("sync_opened_gaps", float(opened.height)),
                ("host_blocked_ns", float(blocked)),
            ),
        ),
    )


def detect_allocator_churn(ctx: FindingContext) -> Estimate | None:
    if ctx.step_count <= 1 and ctx.window is not None and not ctx.window.steady:
        # One step of a window with start-up in it: its allocations are the warm-up's.
        return None
    ev = ctx.trace.events
    calls = ev.filter(
        pl.col("kind").is_in(["runtime", "driver"])
        & pl.col("name").cast(pl.String).str.contains(ALLOCATOR_CALLS)
    )
    if ctx.steps is not None and ctx.step_count > 1:
        # Steady state: the warm-up step (the first one when none is flagged) allocates by design.
        first = (
            ctx.steps.warmup_step
            if ctx.steps.warmup_step is not None
            else ctx.steps.steps["step"].min()
        )
        calls = calls.filter(pl.col("step").is_not_null() & (pl.col("step") != first))
    if calls.height == 0:
        return None
    host_ns = int(calls["dur_ns"].sum())
    slow = allocating_ops(ctx.trace, calls)
    # Only the part of those calls during which the device sat idle costs time: cudaFree
    # waits for the device, and a blocked host launches nothing meanwhile.
    spans = calls.select(pl.col("ts_ns").alias("start_ns"), "end_ns")
    busy = busy_intervals(ctx.trace).select("start_ns", "end_ns")
    idle_during = intervals.difference(spans, busy)
    idle_ns = int((idle_during["end_ns"] - idle_during["start_ns"]).sum())
    names = (
        calls.group_by(pl.col("name").cast(pl.String))
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "name"], descending=[True, False])
    )
    return estimate(
        ctx,
        "allocator_churn",
        {"idle": idle_ns},
        # its idle is launch_bound's too (a blocked host launches nothing): priced here first,
        # launch_bound is what fewer launches add once the allocator is warm
        within={"idle": "launch_bound"},
        # the ops around the calls as long as their warm calls, then the calls removed
        transforms=(*warm_allocations(slow), Remove(ALLOCATOR_CALLS)),
        confidence="medium",
        confidence_reason=f"{calls.height} allocator calls in steady-state steps (warm-up step left out), "
        f"{host_ns / 1e6:.2f} ms of host time",
        method="the time inside cudaMalloc/cudaFree calls of steady-state steps during which the "
        "device was idle (cudaFree synchronises; a blocked host launches nothing): a warm caching "
        "allocator makes no such calls. Replayed: the calls removed, and each operator that made one "
        "as long as its calls with the same shapes that did not "
        f"({int(slow['calls'].sum()) if slow.height else 0} calls, {float(slow['excess_ns'].sum()) / 1e6 if slow.height else 0.0:.2f} ms "
        "of host time beyond the allocator calls themselves)",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in names.iter_rows(named=True)
            )
        ),
    )


HOST_CAUSES = ("untraced", "host_compute", "python")
NO_CULPRIT = "(no host op)"


# Host time per kernel launched above which an operator is doing more than dispatching its
# kernels (dispatch is microseconds, tens with the profiler's shapes; 124 ms in one foreach op
# that launches 6 kernels is not).
DISPATCH_MAX_NS_PER_KERNEL = 200_000


def _launching_ops(ctx: FindingContext) -> list[str]:
    """Names of the operators whose host time is dispatch: they launched device work (directly
    or as the outermost op) and spent at most DISPATCH_MAX_NS_PER_KERNEL per kernel doing so."""
    k = ctx.trace.kernels
    op, top = k["op_name"].cast(pl.String), k["top_op_name"].cast(pl.String)
    # each kernel once per operator that launched it (its own op, and the outermost op when
    # that is another one)
    launched = (
        pl.concat([op, top.filter(top.ne_missing(op))])
        .drop_nulls()
        .alias("name")
        .value_counts(name="kernels")
    )
    host = (
        ctx.trace.events.lazy()
        .filter(pl.col("kind") == "cpu_op")
        .group_by("name")
        .agg(pl.col("dur_ns").sum().alias("host_ns"))
        .with_columns(pl.col("name").cast(pl.String))
        .collect()
    )
    per = launched.join(host, on="name", how="inner").filter(
        pl.col("host_ns") <= pl.col("kernels") * DISPATCH_MAX_NS_PER_KERNEL
    )
    return per["name"].to_list()


def detect_host_bound(ctx: FindingContext) -> Estimate | None:
    """Idle gaps while the host ran untraced code or CPU-heavy ops inside a named region."""
    if ctx.gaps is None:
        return None
    # From every gap (the result's culprit table keeps only the top ones), except the gaps a
    # sync opened: the sync drained the queue, so no host work there can overlap queued GPU
    # work until the sync goes; those gaps are host_sync's, and what the host work then still
    # costs shows once the sync is removed.
    culprits = (
        ctx.gaps.gaps.join(
            ctx.sync_gaps.select("device", "start_ns"), on=["device", "start_ns"], how="anti"
        )
        .filter(
            pl.col("cause").is_in(HOST_CAUSES)
            & pl.col("culprit").is_not_null()
            & (pl.col("culprit") != NO_CULPRIT)
            & ~pl.col("culprit").str.contains(DYNAMO_INTERNAL.pattern)
            # a collective's host span (gloo:all_reduce, c10d::allreduce_) is communication:
            # its findings (cpu_collectives, allreduce_per_parameter, ...) say how to cut it
            & ~_in_collective()
            # an operator that launches device work spends its host time dispatching it:
            # launch overhead, which launch_bound prices and CUDA graphs remove (zeroing that
            # op's own time everywhere would claim every launch of it)
            & ~(pl.col("culprit").str.starts_with("aten::") & pl.col("culprit").is_in(_launching_ops(ctx)))
        )
        .group_by("culprit")
        .agg(pl.col("dur_ns").sum().alias("idle_ns"), pl.len().alias("gaps"))
        .sort(["idle_ns", "culprit"], descending=[True, False])
    )
    if culprits.height == 0:
        return None
    idle = int(culprits["idle_ns"].sum())
    top = str(culprits["culprit"][0])
    return estimate(
        ctx,
        "host_bound",
        {"idle": idle},
        # the regions' own host time (untraced or CPU work), not the ops they call: those
        # launch the device work (launch_bound's fix)
        transforms=(ShrinkOwnTime(exact_names(str(c) for c in culprits["culprit"].to_list())),),
        confidence="low",
        confidence_reason="the trace shows where the host was, not what it did there; moving it off the "
        "critical path may not be possible",
        method="device idle time in gaps while the host was inside these regions doing untraced or "
        "CPU-heavy work, all of it, as if that work overlapped with queued GPU work",
        title=f"The GPU waits while the host works in {top}",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(
                    name=str(r["culprit"]), calls=int(r["gaps"]), dur_ns=int(r["idle_ns"])
                )
                for r in culprits.head(5).iter_rows(named=True)
            ),
            locations=ctx.locations_of([str(c) for c in culprits["culprit"].head(3).to_list()]),
            figures=(("host_idle_ns", float(idle)),),
        ),
        fix=host_work_advice(ctx.workload),
    )
