"""Findings about copies: pageable host memory, small tensors built on the CPU every step,
and layout copies (``.contiguous()``)."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.catalogue import PINNED_GBPS
from traceinsight.analysis.findings.model import Evidence, KernelEvidence, OpEvidence, Pool
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib.lineage import NONE, climb, ids_at, names_at
from traceinsight.analysis.sections.gaps import DATA_LOADING_PATTERN
from traceinsight.analysis.whatif.copies import PinCopies

# Host ops that make a tensor from nothing or from Python data.
SOURCE_OPS = (
    "aten::tensor",
    "aten::as_tensor",
    "aten::scalar_tensor",
    "aten::arange",
    "aten::full",
    "aten::ones",
    "aten::zeros",
    "aten::randn",
    "aten::rand",
    "aten::randint",
    "aten::randperm",
    "aten::linspace",
    "aten::normal",
    "aten::eye",
)
SELF_COPYING_OPS = ("aten::tensor", "aten::as_tensor", "aten::scalar_tensor")
# Top-level ops whose host-to-device copies move a tensor made on the CPU.
COPY_OPS = (
    "aten::tensor",
    "aten::as_tensor",
    "aten::scalar_tensor",
    "aten::lift_fresh",
    "aten::to",
    "aten::_to_copy",
    "aten::copy_",
    "aten::cuda",
)
CAUSE_FINDING = {
    "sync": "host_sync",
    "allocator": "allocator_churn",
    "launch_overhead": "launch_bound",
    "host_compute": "host_bound",
    "untraced": "host_bound",
    "data_loading": "dataloader_stall",
}
LAYOUT_OPS = ("aten::contiguous", "aten::reshape", "aten::flatten")


def _memcpys(ctx: FindingContext) -> pl.DataFrame:
    return ctx.trace.kernels.filter(pl.col("kind") == "memcpy").with_columns(
        pl.col("name").cast(pl.String)
    )


def _pinned_gbps(copies: pl.DataFrame, direction: str) -> tuple[float, str]:
    pinned = copies.filter(
        pl.col("name").str.contains(direction)
        & pl.col("name").str.contains("Pinned")
        & (pl.col("bytes") >= 1 << 20)
    )
    if pinned.height > 0:
        gbps = float(pinned["bytes"].sum()) / float(pinned["dur_ns"].sum())
        return gbps, f"the pinned {direction} copies of this trace ({gbps:.1f} GB/s)"
    return PINNED_GBPS, f"{PINNED_GBPS:g} GB/s, a typical pinned PCIe copy rate"


def detect_pageable_memcpy(ctx: FindingContext) -> Estimate | None:
    copies = _memcpys(ctx)
    pageable = copies.filter(pl.col("name").str.contains("Pageable"))
    if pageable.height == 0:
        return None
    saving = 0.0
    sources = []
    pinned: list[PinCopies] = []
    for direction in ("HtoD", "DtoH"):
        rows = pageable.filter(pl.col("name").str.contains(direction))
        if rows.height == 0:
            continue
        gbps, src = _pinned_gbps(copies, direction)
        old_ns = float(rows["dur_ns"].sum())
        new_ns = min(old_ns, float(rows["bytes"].fill_null(0).sum()) / gbps)
        saving += old_ns - new_ns
        sources.append(src)
        if old_ns > 0:
            # the fix: pinned at that rate, and non_blocking (the host call no longer waits)
            pinned.append(PinCopies(f"{direction}.*Pageable", new_ns / old_ns))
    ops = (
        pageable.group_by(pl.col("top_op_name").cast(pl.String).fill_null("(no op)").alias("op"))
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum(), pl.col("bytes").sum())
        .sort(["dur_ns", "op"], descending=[True, False])
    )
    return estimate(
        ctx,
        "pageable_memcpy",
        {"memcpy": saving},
        transforms=tuple(pinned),
        confidence="medium",
        confidence_reason=f"{pageable.height} copies marked Pageable by the profiler",
        method="pageable copy time minus the same bytes at "
        + " and ".join(sources)
        + "; the overlap non_blocking copies allow is not counted",
        evidence=Evidence(
            ops=tuple(
                OpEvidence(name=r["op"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in ops.head(5).iter_rows(named=True)
            ),
            locations=ctx.locations_of([o for o in ops["op"].to_list() if o != "(no op)"]),
            figures=(
                ("pageable_copy_ns", float(pageable["dur_ns"].sum())),
                ("pageable_bytes", float(pageable["bytes"].sum())),
            ),
        ),
    )


def _ancestors(ctx: FindingContext, ids: pl.DataFrame, levels: int = 3) -> pl.DataFrame:
    """``id`` plus the names of its first ``levels`` ancestors (``a1`` .. ``aN``)."""
    rows = climb(ctx.trace, ids["id"].fill_null(NONE), levels + 1)
    columns = {"p0": ids_at(ctx.trace, rows[1])}
    for level in range(1, levels + 1):
        columns[f"p{level}"] = ids_at(ctx.trace, rows[level + 1])
        columns[f"a{level}"] = names_at(ctx.trace, rows[level])
    return ids.with_columns(**columns)


def _cpu_sources(ctx: FindingContext) -> pl.DataFrame:
    """Calls of tensor-making ops inside steps that launched no GPU work (so they ran on the
    CPU), outside data loading (the DataLoader builds batches on the CPU by design)."""
    ev = ctx.trace.events
    calls = ev.filter(
        (pl.col("kind") == "cpu_op")
        & pl.col("name").cast(pl.String).is_in(SOURCE_OPS)
        & pl.col("step").is_not_null()
    ).select("id", pl.col("name").cast(pl.String), "step")
    if calls.height == 0:
        return calls
    launched = ctx.trace.kernels.select(pl.col("op_id").alias("id")).drop_nulls().unique()
    with_gpu = _ancestors(ctx, launched, levels=2)
    gpu_ids = pl.concat([with_gpu["id"], with_gpu["p0"], with_gpu["p1"]]).drop_nulls().unique()
    calls = calls.filter(~pl.col("id").is_in(gpu_ids.implode()))
    lineage = _ancestors(ctx, calls.select("id"))
    in_loader = pl.any_horizontal(
        [pl.col(f"a{i}").fill_null("").str.contains(DATA_LOADING_PATTERN) for i in (1, 2, 3)]
    )
    return calls.join(lineage.filter(~in_loader).select("id"), on="id", how="semi")


def detect_cpu_tensor_creation(ctx: FindingContext) -> Estimate | None:
    copies = _memcpys(ctx).filter(
        pl.col("name").str.contains("HtoD")
        & pl.col("top_op_name").cast(pl.String).is_in(COPY_OPS)
        & pl.col("step").is_not_null()
    )
    sources = _cpu_sources(ctx)
    # torch.tensor(data, device="cuda") makes and copies in one op: it is its own source.
    self_made = copies.filter(pl.col("top_op_name").cast(pl.String).is_in(SELF_COPYING_OPS)).height
    steps = max(ctx.step_count, 1)
    if copies.height < steps or sources.height + self_made < steps:
        return None  # not a per-step habit: fewer than one CPU-made tensor copied per step
    op_names = sorted(
        {*copies["top_op_name"].cast(pl.String).to_list(), *sources["name"].to_list()}
    )
    idle = 0
    parent: dict[Pool, str] = {"memcpy": "pageable_memcpy"}
    if ctx.gaps is not None:
        # Gaps whose culprit is one of those calls or runs inside one (randn -> normal_).
        owners = pl.concat([sources["id"], copies["top_op_id"].drop_nulls()]).unique()
        gaps = ctx.gaps.gaps.filter(pl.col("culprit_id").is_not_null())
        lineage = _ancestors(ctx, gaps.select(pl.col("culprit_id").alias("id")).unique())
        inside = lineage.filter(
            pl.any_horizontal([pl.col(c).is_in(owners.implode()) for c in ("id", "p0", "p1", "p2")])
        )["id"]
        gaps = gaps.filter(pl.col("culprit_id").is_in(inside.implode()))
        idle = int(gaps["dur_ns"].sum())
        if gaps.height:
            # These gaps were also attributed to a cause; the finding for that cause gives them up.
            cause = str(
                gaps.group_by("cause").agg(pl.col("dur_ns").sum()).sort(["dur_ns", "cause"])["cause"][-1]
            )
            owner = CAUSE_FINDING.get(cause)
            if owner:
                parent["idle"] = owner
    made = sources.group_by("name").agg(pl.len().alias("calls"))
    copied = copies.group_by(pl.col("top_op_name").cast(pl.String).alias("name")).agg(
        pl.len().alias("calls"), pl.col("dur_ns").sum(), pl.col("bytes").sum()
    )
    ops = tuple(
        OpEvidence(name=r["name"], calls=int(r["calls"]))
        for r in made.sort(["calls", "name"], descending=[True, False]).head(3).iter_rows(named=True)
    ) + tuple(
        OpEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
        for r in copied.sort(["dur_ns", "name"], descending=[True, False]).head(3).iter_rows(named=True)
    )
    return estimate(
        ctx,
        "cpu_tensor_creation",
        {"memcpy": float(copies["dur_ns"].sum()), "idle": idle},
        within=parent,
        confidence="medium",
        confidence_reason=f"{(sources.height + self_made) / steps:.0f} tensors made on the CPU and "
        f"{copies.height / steps:.0f} host-to-device copies per step",
        method="the host-to-device copies' device time plus the idle gaps whose host culprit is one of "
        "the making or copying ops (the GPU runs dry while the CPU builds and copies); making the "
        "tensors on the device removes both, its own kernels being negligible",
        evidence=Evidence(
            ops=ops,
            locations=ctx.locations_of(op_names),
            figures=(
                ("cpu_tensors_per_step", (sources.height + self_made) / steps),
                ("copies_per_step", copies.height / steps),
                ("copy_bytes", float(copies["bytes"].fill_null(0).sum())),
                ("creation_idle_ns", float(idle)),
            ),
        ),
    )


def detect_noncontiguous_copy(ctx: FindingContext) -> Estimate | None:
    if ctx.kernels is None:
        return None
    k = ctx.trace.kernels.filter(pl.col("kind") == "kernel").select(
        "op_id", "dur_ns", pl.col("name").cast(pl.String).alias("kernel")
    )
    # the launching op and its parent and grandparent, by name
    lineage = climb(ctx.trace, k["op_id"].fill_null(NONE), 2)
    chain = k.with_columns(**{f"n{level}": names_at(ctx.trace, lineage[level]) for level in range(3)})
    layout = pl.lit(False)
    for col in ("n0", "n1", "n2"):
        layout = layout | pl.col(col).is_in(LAYOUT_OPS)
    rows = chain.filter(layout & pl.col("n0").is_in(["aten::copy_", "aten::clone", "aten::_to_copy"]))
    if rows.height == 0:
        return None
    origin = pl.coalesce(
        pl.when(pl.col("n2").is_in(LAYOUT_OPS)).then(pl.col("n2")),
        pl.when(pl.col("n1").is_in(LAYOUT_OPS)).then(pl.col("n1")),
        pl.col("n0"),
    )
    by_op = (
        rows.group_by(origin.alias("op"))
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "op"], descending=[True, False])
    )
    by_kernel = (
        rows.group_by("kernel")
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "kernel"], descending=[True, False])
    )
    return estimate(
        ctx,
        "noncontiguous_copy",
        {"compute": float(rows["dur_ns"].sum())},
        confidence="low",
        confidence_reason="the consumer of the copy may run slower on a strided input; the trace cannot tell",
        method="device time of copy kernels launched by .contiguous()/reshape of non-contiguous tensors, "
        "all of it, as if the layout copy disappeared",
        evidence=Evidence(
            ops=tuple(
                OpEvidence(name=r["op"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in by_op.head(5).iter_rows(named=True)
            ),
            kernels=tuple(
                KernelEvidence(name=r["kernel"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
                for r in by_kernel.head(3).iter_rows(named=True)
            ),
            locations=ctx.locations_of(list(LAYOUT_OPS)),
        ),
    )
