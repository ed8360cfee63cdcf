"""repeated_launches: a loop on the host that calls the same few operators once per item.

Per host thread and parent span, the operators in call order; a sequence of at most
``REPEAT_MAX_PERIOD`` operators that repeats at least ``REPEAT_MIN`` times back to back is a
loop (over parameters, over a batch's samples, over a list of tensors). Each repeat launches its
own small kernels, so the loop costs one dispatch and one launch per operator per item; one
foreach or batched call costs them once. A model's layers repeat too, but with many more
operators each and fewer times. GEMM loops are ``sequential_small_gemms``'s, the optimizer's
loop over its parameters ``unfused_optimizer``'s.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.analysis.findings.catalogue import REPEAT_MAX_PERIOD, REPEAT_MIN
from traceinsight.analysis.findings.model import Evidence, OpEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import DYNAMO_INTERNAL, FindingContext
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.analysis.sections.breakdown import busy_intervals
from traceinsight.analysis.whatif.repeats import CollapseSpans

THREAD = ["pid", "tid"]
# Ops whose loops other findings price (the optimizer's step, matmuls), or that are the
# autograd engine's own (one call per node of the graph, not a loop in the user's code).
# Collectives are priced by the communication findings (one bucketed call for many), and a
# foreach op is already the batched call this finding advises.
NOT_LOOPS = (
    r"(?i)^Optimizer\.|mm$|matmul|linear|addmm|baddbmm|^autograd::|Backward|_foreach_|"
    r"^(c10d|nccl|gloo)|all_?reduce|all_?gather|reduce_scatter|broadcast|all_to_all|record_param_comms|"
    r"^aten::(detach|view|alias|t|as_strided|slice|select|unbind)$"
)
RUN_SCHEMA = {
    "pid": pl.Int64, "tid": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
    "period": pl.Int64, "repeats": pl.Int64, "ops": pl.String, "kernels": pl.Int64,
}


def _calls(ctx: FindingContext) -> pl.DataFrame:
    """Operators with their parent span and the number of kernels each launched (its own and
    those of the operators it calls)."""
    k = ctx.trace.kernels
    launched = (
        pl.concat([k["op_id"], k["top_op_id"].filter(k["top_op_id"].ne_missing(k["op_id"]))])
        .drop_nulls()
        .alias("id")
        .value_counts(name="kernels")
    )
    return (
        ctx.trace.events.select("id", "kind", *THREAD, "parent", "step", "ts_ns", "end_ns", "name")
        .filter((pl.col("kind") == "cpu_op") & pl.col("step").is_not_null() & pl.col("parent").is_not_null())
        .select(
            pl.col("id").cast(pl.Int64), *THREAD, "parent", "step", "ts_ns", "end_ns",
            # equal names have equal codes: the loop search compares integers, not strings
            pl.col("name").to_physical().cast(pl.Int64).alias("code"), pl.col("name").cast(pl.String),
        )
        .join(launched.select(pl.col("id").cast(pl.Int64), pl.col("kernels").cast(pl.Int64)), on="id", how="left")
        .with_columns(pl.col("kernels").fill_null(0))
        .sort([*THREAD, "parent", "ts_ns"])
    )


def find_loops(ctx: FindingContext) -> pl.DataFrame:
    """One row per loop found (``RUN_SCHEMA``): its thread, step, span, period (operators per
    item), repeats (items), the operators of one item and the kernels the loop launched. Shorter
    periods are tried first; a call belongs to one loop at most."""
    calls = _calls(ctx)
    rows: list[dict[str, object]] = []
    if calls.height == 0:
        return pl.DataFrame(schema=RUN_SCHEMA)
    group = [*THREAD, "parent"]
    # The calls are sorted by (thread, parent, time): a group is a run of rows, numbered once.
    # Shifts over the whole frame compared within one group number do what ``.over(group)``
    # does, without a window per group (hundreds of thousands of parents on a large trace).
    changed = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in group])
    # Whether a call may be a loop's item (no optimizer, matmul or autograd op; no dynamo
    # internals): matched once per distinct name, not once per period over every call.
    barred_expr = name_matches(calls, NOT_LOOPS) | name_matches(calls, DYNAMO_INTERNAL.pattern)
    calls = calls.with_columns(gid=changed.cast(pl.Int64).cum_sum(), barred=barred_expr)
    # In arrays: per period, the calls no shorter loop took, compared with the call ``period``
    # places on (same name, same thread and parent); a run of r matches covers r + period calls,
    # (r + period) / period items. The last ``period`` calls of a group never match, so a run
    # (counted by non-matches) never spans two groups.
    code = calls["code"].to_numpy()
    gid = calls["gid"].to_numpy()
    barred_all = calls["barred"].to_numpy()
    kernels_all = calls["kernels"].to_numpy()
    starts_all, ends_all = calls["ts_ns"].to_numpy(), calls["end_ns"].to_numpy()
    pids_all, tids_all, steps_all = calls["pid"].to_numpy(), calls["tid"].to_numpy(), calls["step"].to_numpy()
    names_all = calls["name"]
    taken = np.zeros(calls.height, dtype=bool)
    for period in range(1, REPEAT_MAX_PERIOD + 1):
        free = np.flatnonzero(~taken)
        n = free.size
        if n <= period:
            break
        c, g = code[free], gid[free]
        same = np.zeros(n, dtype=bool)
        same[: n - period] = (c[:-period] == c[period:]) & (g[:-period] == g[period:])
        matched = np.flatnonzero(same)
        if matched.size == 0:
            continue
        run = np.cumsum(~same)[matched]
        _, first, r = np.unique(run, return_index=True, return_counts=True)
        repeats_of = (r + period) // period
        long_enough = repeats_of >= REPEAT_MIN
        if not long_enough.any():
            continue
        # Per call, once a period (not per candidate run): whether it may be a loop's item
        # and the kernels up to it.
        barred = barred_all[free]
        launched = np.concatenate([[0], np.cumsum(kernels_all[free])])
        for i, repeats in zip(matched[first][long_enough].tolist(), repeats_of[long_enough].tolist(), strict=True):
            stop = min(i + repeats * period, n)
            if barred[i : i + period].any():
                continue
            kernels = int(launched[stop] - launched[i])
            if kernels < repeats:
                continue  # items that launch nothing (views, metadata) cost no launch
            rows_of_loop = free[i:stop]
            head = int(rows_of_loop[0])
            rows.append({
                "pid": int(pids_all[head]), "tid": int(tids_all[head]), "step": int(steps_all[head]),
                "start_ns": int(starts_all[rows_of_loop].min()), "end_ns": int(ends_all[rows_of_loop].max()),
                "period": period, "repeats": int(repeats),
                "ops": " → ".join(names_all.gather(rows_of_loop[:period]).to_list()), "kernels": kernels,
            })
            taken[rows_of_loop] = True
    return pl.DataFrame(rows, schema=RUN_SCHEMA) if rows else pl.DataFrame(schema=RUN_SCHEMA)


def detect_repeated_launches(ctx: FindingContext) -> Estimate | None:
    loops = find_loops(ctx)
    if loops.height == 0:
        return None
    steps = max(ctx.step_count, 1)
    # Only the GPU's idle while the loop ran can the loop have cost (the fallback claim).
    spans = loops.select("start_ns", "end_ns")
    idle = intervals.difference(spans, busy_intervals(ctx.trace).select("start_ns", "end_ns"))
    idle_ns = int((idle["end_ns"] - idle["start_ns"]).sum()) if idle.height else 0
    if idle_ns <= 0:
        return None
    by_ops = (
        loops.group_by("ops", "period")
        .agg(
            pl.col("repeats").sum().alias("items"), pl.col("repeats").median().alias("repeats"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("host_ns"), pl.col("kernels").sum(),
            pl.len().alias("loops"),
        )
        .sort(["host_ns", "ops"], descending=[True, False])
    )
    # The fix: each loop as one call of each of its operators (a foreach op or a batched call):
    # the loop's host time, launches included, divided by its items. Its kernels keep their
    # time: a foreach kernel moves the same bytes (what it saves on tiny kernels is not counted).
    transforms = tuple(
        CollapseSpans(
            tuple(
                (int(r["pid"]), int(r["tid"]), int(r["start_ns"]), int(r["end_ns"]))
                for r in loops.filter(pl.col("ops") == g["ops"]).iter_rows(named=True)
            ),
            1.0 / float(g["repeats"]),
            what=f"the loop of {g['ops']}",
        )
        for g in by_ops.iter_rows(named=True)
    )
    top = by_ops.row(0, named=True)
    names = str(top["ops"]).split(" → ")
    where = ctx.locations_of(names)
    per_step = int(top["items"]) / steps
    elementwise = all(n.endswith("_") or n in ("aten::mul", "aten::add", "aten::sub", "aten::div", "aten::lerp") for n in names)
    fix = (
        "Replace the loop with foreach ops over the list of tensors: torch._foreach_mul_/_foreach_add_/"
        "_foreach_lerp_ (an EMA of weights: torch._foreach_lerp_(ema, params, 1 - decay)), one launch "
        "per op for all tensors; or torch.compile the function that holds the loop."
        if elementwise
        else "Do the loop's work in one call: stack the items (torch.stack / torch.cat) and call each "
        "op once on the batch, use the foreach variant of the op, or torch.compile the function that "
        "holds the loop."
    )
    return estimate(
        ctx,
        "repeated_launches",
        {"idle": idle_ns},
        within={"idle": "launch_bound"},
        transforms=transforms,
        title=f"A host loop calls {top['ops']} {per_step:.0f} times per step, one small launch each"
        + (f" ({where[0]})" if where else ""),
        fix=fix,
        confidence="medium" if where else "low",
        confidence_reason=f"{int(loops['repeats'].sum())} repeats of {loops.height} loop(s) over {steps} step(s), "
        f"{int(loops['kernels'].sum())} kernels launched from them"
        + ("" if where else "; without Python stacks (with_stack=True) the loop's line is not known"),
        method="per host thread and parent span, a sequence of at most "
        f"{REPEAT_MAX_PERIOD} operators repeated at least {REPEAT_MIN} times back to back; the fix "
        "replayed as each loop taking its host time divided by its repeats (one call of each "
        "operator), its kernels unchanged; the pool estimate is the GPU's idle time while the loops ran",
        evidence=Evidence(
            ops=tuple(
                OpEvidence(name=str(r["ops"]), calls=int(r["items"]), dur_ns=int(r["host_ns"]))
                for r in by_ops.head(5).iter_rows(named=True)
            ),
            locations=where,
            figures=(
                ("repeats_per_step", round(per_step, 1)),
                ("loop_host_ns", float((loops["end_ns"] - loops["start_ns"]).to_numpy().sum())),
                ("loop_idle_ns", float(idle_ns)),
            ),
        ),
    )
