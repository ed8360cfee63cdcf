"""memory_growth: allocated device memory grows at every step (a leak while the loop runs).

Built on the memory section's leak suspects (allocated bytes at step end growing past a
tolerance at every one of the last steps). The finding adds what to look at: the allocations
made during the growing steps that the trace never sees freed, summed by the op that made
them and, where Python stacks were recorded (``with_stack=True``), by the innermost user
``file:line`` around the allocation. Its cost is memory, not time: no time saving is claimed,
the growth per step is the figure (it ends in an out-of-memory error, or in allocator retries
and fragmentation before that).
"""

from __future__ import annotations

import re

import polars as pl

from traceinsight.analysis.findings.model import Evidence, OpEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.lib.host_tree import innermost_op
from traceinsight.analysis.sections.memory import ALLOCATION_HELPERS, LeakSuspect
from traceinsight.analysis.sections.memory import _events as memory_events

# Python frames of libraries, not the user's code (the same rule as the findings' locations).
_LIBRARY = re.compile(
    r"(^<built-in|^<frozen|^nn\.Module:|^torch/|/torch/|site-packages|dist-packages|"
    r"^threading\.py|/threading\.py|^contextlib\.py|traceinsight/capture|^\w+\.py\(\d+\): __call__$)"
)
_FRAME = re.compile(r"^(.*?)\((\d+)\): (.*)$")
# Allocations located by op, and by Python frame (a costlier join), largest first: the sites
# of most of the growth.
MAX_SITES = 300
MAX_FRAMED = 20


def _survivors(ctx: FindingContext, leak: LeakSuspect) -> pl.DataFrame:
    """Allocations on the leak's device during its growing steps whose block the trace never
    sees given back (no later event at the address)."""
    assert ctx.memory is not None
    mem = memory_events(ctx.trace).filter(pl.col("label") == leak.device)
    ends = ctx.memory.step_ends.filter(pl.col("device") == leak.device).sort("step")
    lo = ends.filter(pl.col("step") == leak.first_step)["step_end_ns"]
    hi = ends.filter(pl.col("step") == leak.last_step)["step_end_ns"]
    if lo.len() == 0 or hi.len() == 0:
        return mem.clear()
    key = ["device_type", "device", "addr"]
    return (
        mem.with_columns(next_row=pl.col("row").shift(-1).over(key))
        .filter(
            (pl.col("bytes") > 0)
            & pl.col("next_row").is_null()
            & (pl.col("ts_ns") > int(lo[0]))
            & (pl.col("ts_ns") <= int(hi[0]))
        )
        .sort("bytes", descending=True)
    )


def _site(name: str) -> str:
    match = _FRAME.match(name)
    return f"{match.group(1)}:{match.group(2)}" if match else name


def _user_frames(ctx: FindingContext, points: pl.DataFrame) -> list[str]:
    """Where the user's code made these allocations (points: pid, tid, ts_ns), most bytes
    first: the line that called the outermost module (``out = model(x)``: what the loop
    keeps is that call's output), then the innermost user frame around the allocation."""
    py = ctx.trace.events.filter(pl.col("kind") == "python").select("pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String))
    if py.height == 0 or points.height == 0:
        return []
    keyed = points.select("pid", "tid", pl.col("ts_ns").alias("t"), "bytes").with_row_index("r")
    around = keyed.join(py, on=["pid", "tid"]).filter((pl.col("ts_ns") <= pl.col("t")) & (pl.col("end_ns") >= pl.col("t")))
    user = ~pl.col("name").str.contains(_LIBRARY.pattern)
    module_start = (
        around.filter(pl.col("name").str.starts_with("nn.Module:")).group_by("r").agg(pl.col("ts_ns").min().alias("module_ts"))
    )
    callers = (
        around.join(module_start, on="r")
        .filter(user & (pl.col("ts_ns") < pl.col("module_ts")))
        .sort(["r", "ts_ns"], descending=[False, True])
        .group_by("r", maintain_order=True)
        .first()
    )
    innermost = around.filter(user).sort(["r", "ts_ns"], descending=[False, True]).group_by("r", maintain_order=True).first()
    out: list[str] = []
    for frames in (callers, innermost):
        ranked = frames.group_by("name").agg(pl.col("bytes").sum()).sort(["bytes", "name"], descending=[True, False])
        out.extend(_site(n) for n in ranked["name"].to_list() if _site(n) not in out)
    return out


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def detect_memory_growth(ctx: FindingContext) -> Estimate | None:
    if ctx.memory is None or not ctx.memory.leaks:
        return None
    leak = max(ctx.memory.leaks, key=lambda s: s.growth_per_step_bytes)
    kept = _survivors(ctx, leak)
    sites = kept.head(MAX_SITES).select("pid", "tid", "ts_ns", "bytes")
    ops = pl.DataFrame()
    frames: tuple[str, ...] = ()
    if sites.height:
        located = innermost_op(ctx.trace.events, sites, owner_skips=ALLOCATION_HELPERS)
        ops = (
            located.with_columns(pl.col("owner_name").fill_null("(no op)"))
            .group_by("owner_name")
            .agg(pl.col("bytes").sum(), pl.len().alias("allocations"))
            .sort(["bytes", "owner_name"], descending=[True, False])
        )
        frames = tuple(_user_frames(ctx, sites.head(MAX_FRAMED))[:3])
    kept_bytes = int(kept["bytes"].sum() or 0)
    training = ctx.workload.training
    cause = (
        "tensors kept from one step to the next: typically outputs or losses appended to a list (or "
        "added to a running total) without .detach() or .item()"
        + (", which also keeps each step's autograd graph and its saved activations alive" if training else "")
    )
    per_step = leak.growth_per_step_bytes
    return estimate(
        ctx,
        "memory_growth",
        {},
        title=f"Allocated GPU memory grows by {_mib(per_step)} per step",
        confidence="high" if leak.steps - 1 >= 4 else "medium",
        confidence_reason=f"{leak.device}: allocated memory at step end grew at each of {leak.steps - 1} steps "
        f"({leak.first_step}→{leak.last_step}), {_mib(leak.first_bytes)} → {_mib(leak.last_bytes)}; likely cause: {cause}",
        method="no time saving is claimed: the growth per step is allocated bytes at step end, last step "
        "minus first of the growing run over the steps between; the sites are allocations in those steps "
        "the trace never sees freed, by the op that made them and the user's file:line",
        evidence=Evidence(
            ops=tuple(
                OpEvidence(name=f"{r['owner_name']}: {_mib(int(r['bytes']))} never freed", calls=int(r["allocations"]))
                for r in ops.head(3).iter_rows(named=True)
            ),
            locations=frames,
            figures=(
                ("growth_per_step_bytes", float(round(per_step))),
                ("growth_bytes", float(leak.growth_bytes)),
                ("growing_steps", float(leak.steps - 1)),
                ("kept_allocated_bytes", float(kept_bytes)),
                ("allocated_at_last_step_bytes", float(leak.last_bytes)),
            ),
        ),
    )
