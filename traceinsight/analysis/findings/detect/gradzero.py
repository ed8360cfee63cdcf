"""zero_grad_memset: gradients zeroed in place every step instead of set to None.

``optimizer.zero_grad(set_to_none=False)`` (or ``model.zero_grad(set_to_none=False)``) fills
every gradient with zeros: one ``aten::zero_`` (a fill kernel or memset, and its launch) per
parameter, or one ``aten::_foreach_zero_`` per group under a foreach/fused optimizer. The
gradients then stay allocated, so backward's ``AccumulateGrad`` adds each new gradient into the
zeroed one (an ``aten::add_`` kernel and launch per parameter) where it would otherwise take the
new gradient as it is. ``set_to_none=True`` (the default since torch 2.0) removes both.

The evidence is the zeroing ops inside the ``Optimizer.zero_grad`` region (zeroing outside it is
the model's own business) and, only when that region zeroes in place, the ``aten::add_`` under
``AccumulateGrad``. With gradient accumulation over micro-batches the adds of the later
micro-batches stay after the fix; the trace does not say how many micro-batches a step has, so
the saving reads high there (the method says so).
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.model import Evidence, OpEvidence, RegionEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.spans import RemoveSpans

ZERO_GRAD_REGION = r"(?i)zero_grad"
# Ops that zero a gradient in place (the outermost one of a zero_ → fill_ chain is counted).
ZERO_OPS = r"^aten::(zero_|_foreach_zero_|fill_|_foreach_fill_|zeros_like)$"
ACCUMULATE = "torch::autograd::AccumulateGrad"


def _zeroing(ctx: FindingContext) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(zero_grad regions, the outermost zeroing ops inside them on the same thread)."""
    ev = ctx.trace.events.select("id", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "parent", "name", "kind", "input_dims")
    name = pl.col("name").cast(pl.String)
    kind = pl.col("kind").cast(pl.String)
    regions = ev.filter((kind == "user_annotation") & name.str.contains(ZERO_GRAD_REGION)).select(
        "pid", "tid", pl.col("ts_ns").alias("r_start"), pl.col("end_ns").alias("r_end"), name.alias("region")
    )
    if regions.height == 0:
        return regions, pl.DataFrame()
    ops = ev.filter((kind == "cpu_op") & name.str.contains(ZERO_OPS)).select(
        "id", "pid", "tid", "ts_ns", "end_ns", "dur_ns", "parent", name.alias("name"), "input_dims"
    )
    inside = ops.join(regions, on=["pid", "tid"]).filter(
        (pl.col("ts_ns") >= pl.col("r_start")) & (pl.col("end_ns") <= pl.col("r_end"))
    )
    # zero_ calls fill_: keep the outermost zeroing op only
    outer = inside.filter(~pl.col("parent").is_in(inside["id"].implode()))
    return regions, outer.unique("id", maintain_order=True)


def _accumulating_adds(ctx: FindingContext) -> pl.DataFrame:
    ev = ctx.trace.events.select("id", "parent", "name", "kind", "dur_ns")
    name = pl.col("name").cast(pl.String)
    acc = ev.filter(name == ACCUMULATE).select(pl.col("id").alias("parent"))
    return ev.filter((pl.col("kind").cast(pl.String) == "cpu_op") & (name == "aten::add_")).join(
        acc, on="parent", how="semi"
    ).select("id", "dur_ns")


def _device_ns(ctx: FindingContext, op_ids: pl.Series) -> tuple[int, int]:
    """(device time, count) of the kernels and memsets launched under these ops."""
    k = ctx.trace.kernels.filter(pl.col("op_id").is_in(op_ids.implode()) | pl.col("top_op_id").is_in(op_ids.implode()))
    return int(k["dur_ns"].sum() or 0), k.height


def detect_zero_grad_memset(ctx: FindingContext) -> Estimate | None:
    if ctx.window_ns <= 0:
        return None
    regions, zeros = _zeroing(ctx)
    if zeros.height == 0:
        return None
    adds = _accumulating_adds(ctx)
    zero_dev_ns, zero_launches = _device_ns(ctx, zeros["id"])
    add_dev_ns, add_launches = _device_ns(ctx, adds["id"])
    host_ns = int(zeros["dur_ns"].sum() or 0) + int(adds["dur_ns"].sum() or 0)
    # Host time comes off the step where the device was waiting for it: the idle share of the
    # window is the chance that it was (all of it on a launch-bound step, none when the device
    # is busy throughout).
    idle_share = min(1.0, ctx.category_ns("idle") / ctx.window_ns) if ctx.breakdown is not None else 0.0
    idle_claim = host_ns * idle_share
    device_claim = zero_dev_ns + add_dev_ns
    steps = max(ctx.step_count, 1)
    per_step = f"{zeros.height / steps:.0f} zeroing call(s) per step in {regions['region'][0]}"
    ops = (
        zeros.group_by("name")
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort(["dur_ns", "name"], descending=[True, False])
    )
    evidence_ops = [OpEvidence(name=str(r["name"]), calls=int(r["calls"]), dur_ns=int(r["dur_ns"])) for r in ops.iter_rows(named=True)]
    if adds.height:
        evidence_ops.append(OpEvidence(name=f"aten::add_ (in {ACCUMULATE})", calls=adds.height, dur_ns=int(adds["dur_ns"].sum() or 0)))
    ids = tuple(int(i) for i in pl.concat([zeros["id"], adds["id"]]).to_list())
    return estimate(
        ctx,
        "zero_grad_memset",
        {"idle": idle_claim, "compute": device_claim},
        within={"idle": "launch_bound"},
        confidence="high" if adds.height else "medium",
        confidence_reason=f"{per_step}"
        + (f", and {adds.height / steps:.0f} in-place gradient accumulations per step in backward" if adds.height else "")
        + "; set_to_none=True removes both",
        method=f"host time of the zeroing ops inside zero_grad and of the aten::add_ under AccumulateGrad "
        f"({host_ns / steps / 1e6:.2f} ms per step) times the share of the window the GPU was idle "
        f"({idle_share:.0%}: host time saves step time only where the device waited for it), plus the device "
        f"time of the {zero_launches + add_launches} kernels and memsets they launched ({device_claim / steps / 1e6:.2f} ms per step). "
        "With gradient accumulation over micro-batches the later micro-batches' adds stay, so the saving reads high there",
        evidence=Evidence(
            ops=tuple(evidence_ops[:5]),
            regions=(
                RegionEvidence(
                    name=str(regions["region"][0]),
                    calls=regions.height,
                    dur_ns=int((regions["r_end"] - regions["r_start"]).sum() or 0),
                ),
            ),
            locations=ctx.locations_of(["aten::zero_", "aten::_foreach_zero_"]),
            figures=(
                ("zeroing_calls", float(zeros.height)),
                ("accumulate_adds", float(adds.height)),
                ("host_ns", float(host_ns)),
                ("device_ns", float(device_claim)),
                ("idle_share", round(idle_share, 4)),
            ),
        ),
        transforms=(RemoveSpans(ids, label="the in-place gradient zeroing and accumulation"),),
    )
