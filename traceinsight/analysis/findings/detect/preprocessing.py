"""host_preprocessing: the GPU waits while the main thread prepares its next input.

Host work outside a DataLoader that the device waits for: decoding, resizing and normalising
images, tokenising, building a batch on the launching thread before the GPU work that needs
it. It shows as idle gaps in which the launching thread ran CPU ops that launch nothing
(torch ops on CPU tensors), Python, or nothing the profiler records (PIL, OpenCV, NumPy,
tokenizers), and which end when the input reaches the device:

- the gap ends with a host-to-device copy (the prepared input going over), or
- the gap ends with the first device work of a step (the step's host work came first).

Gaps a synchronising call opened are host_sync's (nothing can overlap queued work until the
sync goes); gaps spent inside a DataLoader are dataloader_stall's; gaps spent launching are
launch_bound's. The idle of the gaps is the saving (the work moved off the critical path,
into DataLoader workers or a background thread, or onto the GPU), claimed inside host_bound's
where that finding sees the same gaps; the fix as a transformation shrinks the host time in
those gaps to nothing (:class:`~traceinsight.analysis.whatif.host_windows.ShrinkHostWindows`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.analysis.findings.detect.advice import preprocessing_advice
from traceinsight.analysis.findings.detect.transfers import SELF_COPYING_OPS, SOURCE_OPS
from traceinsight.analysis.findings.model import Evidence, Pool, RegionEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import (
    DYNAMO_INTERNAL,
    FRAME,
    LIBRARY_FRAME,
    FindingContext,
)
from traceinsight.analysis.lib.lineage import climb, names_at
from traceinsight.analysis.lib.timeline import step_spans
from traceinsight.analysis.whatif.host_windows import ShrinkHostWindows

# The gap causes that are host work (gaps' classes: CPU ops launching nothing, Python only,
# nothing recorded on the thread).
HOST_WORK = ("host_compute", "python", "untraced")
NO_CULPRIT = "(no host op)"
H2D = r"(?i)memcpy.*(htod|host.?to.?device)|HtoD"
# Host work before a copy shorter than this is the Python between two launches, not an input
# being prepared.
MIN_GAP_NS = 50_000
FACTORIES = (*SOURCE_OPS, *SELF_COPYING_OPS)
# Host spans of a c10d collective ("gloo:all_reduce"): a backend without device kernels copies
# the tensor back to the device when it is done, which is not an input.
COLLECTIVE = r"^(gloo|mpi|ucc|nccl|xccl):\w+$|^c10d::|^record_param_comms$"


def _factory_gaps(ctx: FindingContext, gaps: pl.DataFrame) -> pl.DataFrame:
    """The gaps whose culprit is a tensor factory or runs inside one (up to three levels):
    cpu_tensor_creation's, a narrower diagnosis of the same idle."""
    out = gaps.select("device", "start_ns", "culprit_id").drop_nulls("culprit_id")
    rows = climb(ctx.trace, out["culprit_id"], 3)
    hit = np.zeros(out.height, dtype=bool)
    for level_rows in rows:
        hit |= names_at(ctx.trace, level_rows).is_in(FACTORIES).fill_null(False).to_numpy()
    return out.filter(pl.Series(hit)).select("device", "start_ns")


def _input_gaps(ctx: FindingContext) -> pl.DataFrame:
    """Host-work gaps that end when the input reaches the device, with ``prep_ns``: the host
    work in them inside the step (see the module doc)."""
    assert ctx.gaps is not None
    gaps = ctx.gaps.gaps.join(ctx.sync_gaps.select("device", "start_ns"), on=["device", "start_ns"], how="anti")
    gaps = gaps.filter(pl.col("cause").is_in(HOST_WORK) & ~pl.col("culprit").fill_null("").str.contains(COLLECTIVE))
    if gaps.height == 0:
        return gaps.with_columns(prep_ns=pl.lit(0, pl.Int64))
    copies = (
        ctx.trace.kernels.filter(
            pl.col("device").is_not_null()
            & pl.col("kind").cast(pl.String).str.starts_with("memcpy")
            & pl.col("name").cast(pl.String).str.contains(H2D)
        )
        .select("device", pl.col("ts_ns").alias("end_ns"))
        .unique()
    )
    gaps = gaps.join(copies, on=["device", "end_ns"], how="semi").join(
        _factory_gaps(ctx, gaps), on=["device", "start_ns"], how="anti"
    )
    # Host time between ProfilerStep spans is the profiler's own step transition: only the
    # part of the host work that falls inside the step of the copy counts.
    spans = step_spans(ctx.trace).select("step", pl.col("host_start_ns").alias("step_start_ns"))
    work = pl.sum_horizontal([pl.col(f"{c}_ns") for c in HOST_WORK])
    outside = (pl.col("step_start_ns").fill_null(pl.col("start_ns")) - pl.col("start_ns")).clip(0, pl.col("dur_ns"))
    return (
        gaps.join(spans, on="step", how="left")
        .with_columns(prep_ns=(work - outside).clip(lower_bound=0))
        .filter(pl.col("prep_ns") >= MIN_GAP_NS)
        .with_columns(window_start_ns=pl.max_horizontal("start_ns", pl.col("step_start_ns").fill_null(pl.col("start_ns"))))
    )


def _frames_in(ctx: FindingContext, gaps: pl.DataFrame, limit: int = 3) -> tuple[str, ...]:
    """``file:line`` of the user's Python frames that ran whole inside the gaps on the gap's
    thread (with_stack traces), longest first: what the host did while the device waited."""
    py = ctx.trace.events.filter(pl.col("kind") == "python").select(
        "pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String)
    )
    py = py.filter(~pl.col("name").str.contains(LIBRARY_FRAME.pattern))
    if py.height == 0:
        return ()
    windows = gaps.drop_nulls(["pid", "tid"]).select("pid", "tid", pl.col("window_start_ns").alias("w0"), pl.col("end_ns").alias("w1"))
    inside = (
        py.join(windows, on=["pid", "tid"])
        .filter((pl.col("ts_ns") >= pl.col("w0")) & (pl.col("end_ns") <= pl.col("w1")))
        .group_by("name")
        .agg((pl.col("end_ns") - pl.col("ts_ns")).sum().alias("ns"))
        .sort(["ns", "name"], descending=[True, False])
    )
    out: list[str] = []
    for name in inside["name"].to_list():
        match = FRAME.match(name)
        site = f"{match.group(1)}:{match.group(2)}" if match else name
        if site not in out:
            out.append(site)
        if len(out) >= limit:
            break
    return tuple(out)


def _fix(ctx: FindingContext) -> str:
    decode = (
        ", decode images there (torchvision.io.decode_jpeg(..., device='cuda') on nvJPEG, or DALI)"
        if ctx.device.vendor == "nvidia"
        else ""
    )
    return preprocessing_advice(ctx.workload, decode)


def detect_host_preprocessing(ctx: FindingContext) -> Estimate | None:
    if ctx.gaps is None:
        return None
    gaps = _input_gaps(ctx)
    if gaps.height == 0:
        return None
    idle = int(gaps["prep_ns"].sum())
    named = pl.col("culprit").is_not_null() & (pl.col("culprit") != NO_CULPRIT) & ~pl.col("culprit").str.contains(DYNAMO_INTERNAL.pattern)
    # host_bound counts the gaps with a named culprit: that part is counted once, here.
    shared = int(gaps.filter(named)["prep_ns"].sum() or 0)
    culprits = (
        gaps.with_columns(pl.when(named).then(pl.col("culprit")).otherwise(pl.lit("(untraced host work)")).alias("culprit"))
        .group_by("culprit")
        .agg(pl.col("prep_ns").sum().alias("idle_ns"), pl.len().alias("gaps"))
        .sort(["idle_ns", "culprit"], descending=[True, False])
    )
    by_class = {c: int(gaps[f"{c}_ns"].sum() or 0) for c in HOST_WORK if f"{c}_ns" in gaps.columns}
    top = max(by_class, key=lambda c: by_class[c]) if by_class else "untraced"
    what = {"host_compute": "CPU ops that launch no GPU work", "python": "Python", "untraced": "host work the profiler did not record"}[top]
    windows = tuple(
        (int(r["pid"]), int(r["tid"]), int(r["start_ns"]), int(r["end_ns"]))
        for r in gaps.drop_nulls(["pid", "tid"]).select("pid", "tid", pl.col("window_start_ns").alias("start_ns"), "end_ns").iter_rows(named=True)
    )
    parts: tuple[tuple[Pool, str, int], ...] = (("idle", "host_bound", shared),) if shared else ()
    return estimate(
        ctx,
        "host_preprocessing",
        {"idle": idle},
        within_parts=parts,
        confidence="medium" if by_class.get("host_compute", 0) > 0 else "low",
        confidence_reason=f"{gaps.height} idle gaps ending with a host-to-device copy, mostly {what}; "
        "the trace shows the host was busy, not what it computed",
        method="device idle time in gaps that end with a host-to-device copy while the launching thread "
        "ran CPU ops that launch nothing, Python or untraced code (not a DataLoader, not a sync, not "
        "a tensor factory), inside the step (host time between profiler steps is the profiler's): "
        "preparing the input off that thread removes all of it, as if the preparation overlapped the "
        "previous step's GPU work",
        evidence=Evidence(
            regions=tuple(
                RegionEvidence(name=str(r["culprit"]), calls=int(r["gaps"]), dur_ns=int(r["idle_ns"]))
                for r in culprits.head(5).iter_rows(named=True)
            ),
            locations=_frames_in(ctx, gaps) or ctx.locations_of([str(c) for c in culprits["culprit"].head(3).to_list()]),
            figures=(
                ("preprocessing_idle_ns", float(idle)),
                *((f"{c}_ns", float(v)) for c, v in by_class.items()),
            ),
        ),
        fix=_fix(ctx),
        transforms=(ShrinkHostWindows(windows, 0.0),),
    )
