"""Is a region, op or kernel overhead-, host-, sync-, data-, memory- or compute-bound?

For every region (ProfilerStep, record_function annotation, compiled graph call, nn.Module
scope, the largest top-level ops, and the whole trace) this measures, on the device timeline:

- the window: from the region's host start (or, when the host runs ahead, the end of the GPU
  work queued before it, which its kernels wait behind) to the end of the last GPU work
  launched inside it (or the host end, if later);
- how busy the GPU was in that window, and what the host was doing in the idle part (the
  causes the gap analysis assigns to idle gaps; idle slices shorter than the gap threshold
  are the back-to-back launch pattern and count as launch overhead);
- FLOPs and bytes of the region's own kernels (from the cost model), achieved TFLOP/s and
  TB/s, arithmetic intensity, the ridge point of the device for the dtypes used, and the
  share of the roofline reached;
- the NVML/GPM counters sampled inside the window.

The label follows from that: a mostly idle GPU is ``overhead``, ``host``, ``sync`` or
``data`` by the dominant idle cause; a busy one is ``compute`` or ``memory`` by where its
work sits against the ridge point. Each label carries the evidence and a confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.cost.roofline import (
    above_peak_reason,
    aggregate,
    confidence_text,
    kernel_work,
    roofline_columns,
    roofline_label,
)
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.device import peaks as devices
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.first_calls import first_call_outliers, first_call_rows
from traceinsight.analysis.lib.timeline import busy_intervals, device_step_spans
from traceinsight.analysis.sections.bound_counters import counter_means, counter_windows
from traceinsight.analysis.sections.bound_labels import (
    CAUSE_LABEL,
    FIRST_CALL_CAUSE,
    idle_causes,
    label_regions,
)
from traceinsight.analysis.sections.bound_regions import assign, behind_queue, region_spans
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.trace.model import Trace

__all__ = ["CAUSE_LABEL", "LABELS", "SPEC", "BoundResult", "run"]

LABELS = ("overhead", "host", "sync", "data", "idle", "compute", "memory", "unknown", "unclassified")

REGION_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "kind": pl.String,
    "region_id": pl.Int64,
    "device": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "host_dur_ns": pl.Int64,
    "label": pl.String,
    "confidence": pl.String,
    "reason": pl.String,
    "evidence": pl.String,
    "busy_pct": pl.Float64,
    "busy_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "idle_cause": pl.String,
    "idle_cause_pct": pl.Float64,
    "kernels": pl.Int64,
    "kernel_ns": pl.Int64,
    "short_kernel_pct": pl.Float64,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "tflops": pl.Float64,
    "tbps": pl.Float64,
    "intensity": pl.Float64,
    "ridge": pl.Float64,
    "pct_of_roofline": pl.Float64,
    "pct_of_peak_flops": pl.Float64,
    "pct_of_peak_bw": pl.Float64,
    "cost_coverage_pct": pl.Float64,
    "above_peak_reason": pl.String,
    "tensor_util_pct": pl.Float64,
    "dram_bw_util_pct": pl.Float64,
    "sm_util_pct": pl.Float64,
    "gpu_util_pct": pl.Float64,
}

TABLE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "name": pl.String,
    "shapes": pl.String,
    "dtypes": pl.String,
    "device": pl.Int64,
    "family": pl.String,
    "calls": pl.Int64,
    "kernels": pl.Int64,
    "kernel_ns": pl.Int64,
    "launch_ns": pl.Int64,
    "label": pl.String,
    "confidence": pl.String,
    "reason": pl.String,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "tflops": pl.Float64,
    "tbps": pl.Float64,
    "intensity": pl.Float64,
    "ridge": pl.Float64,
    "pct_of_roofline": pl.Float64,
    "dtype_class": pl.String,
    "cost_source": pl.String,
    "above_peak_reason": pl.String,
}


@dataclass(frozen=True)
class BoundResult(Result):
    name = "bound"
    device_name: str | None = None
    peaks: dict[str, Any] | None = None
    roofline_available: bool = False
    roofline_reason: str | None = None
    gap_causes_available: bool = False
    gap_reason: str | None = None
    gap_threshold_ns: int = 0
    cost_coverage_pct: float | None = None
    regions: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=REGION_COLUMNS))
    ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TABLE_COLUMNS))
    kernels: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=TABLE_COLUMNS))
    notes: tuple[str, ...] = ()
    # Ops whose first call is far above their steady state (one-time initialisation).
    first_calls: tuple[dict[str, Any], ...] = ()

    def to_polars(self) -> pl.DataFrame:
        return self.regions

    def table(self, by: str) -> pl.DataFrame:
        if by == "region":
            return self.regions
        if by == "op":
            return self.ops
        if by == "kernel":
            return self.kernels
        raise ValueError(f"unknown grouping {by!r}; choose region, op or kernel")


# ---- peaks and devices ------------------------------------------------------------------


def _primary_device(trace: Trace) -> int | None:
    busiest = (
        trace.kernels.filter(pl.col("device").is_not_null())
        .group_by("device")
        .agg(pl.col("dur_ns").sum())
        .sort(["dur_ns", "device"], descending=[True, False])
    )
    return int(busiest["device"][0]) if busiest.height else None


def _peaks_dict(peaks: devices.DevicePeaks) -> dict[str, Any]:
    return {
        "key": peaks.key,
        "name": peaks.name,
        "origin": peaks.origin,
        "mem_bw_tbps": peaks.mem_bw_tbps,
        "tflops": dict(peaks.tflops),
        "sources": dict(peaks.sources),
        "l2_bytes": peaks.l2_bytes,
        "matched_by": peaks.matched_by,
    }


def _step_device_windows(trace: Trace, table: pl.DataFrame) -> pl.DataFrame:
    """Steps take the Steps section's device window (timeline.device_step_spans): from the
    step's start, or the end of earlier steps' GPU work if later, to the end of the last GPU
    work launched inside it. Without this a step's window would include the time its first
    kernel queued behind the previous step's work, and read longer than the step."""
    spans = device_step_spans(trace).select(
        pl.col("host_start_ns").alias("start_ns"), "device_start_ns", "device_end_ns", pl.lit("step").alias("kind")
    )
    if spans.height == 0:
        return table
    return (
        table.join(spans, on=["kind", "start_ns"], how="left")
        .with_columns(
            pl.coalesce("device_start_ns", "start_ns").alias("start_ns"),
            pl.coalesce("device_end_ns", "end_ns").alias("end_ns"),
        )
        .drop("device_start_ns", "device_end_ns")
    )


def _first_call_gaps(gaps: pl.DataFrame, first_calls: pl.DataFrame) -> pl.DataFrame:
    """Launch-overhead gaps that overlap a one-time first call's host span take the cause ``first_call``: the
    GPU waited on initialisation (cuBLAS handles, autotuning), not on the steady state's launches."""
    if first_calls.height == 0 or gaps.height == 0:
        return gaps
    spans = first_calls.select(pl.col("start_ns").alias("_fc_start"), pl.col("end_ns").alias("_fc_end"))
    hit = (
        gaps.with_row_index("_gap")
        .join_where(spans, pl.col("start_ns") < pl.col("_fc_end"), pl.col("end_ns") > pl.col("_fc_start"))
        .select("_gap")
        .unique()
    )
    return (
        gaps.with_row_index("_gap")
        .with_columns(
            # Only gaps read as launch overhead: a gap the host spent compiling or computing
            # keeps its cause (a torch.compile step stays host-bound).
            pl.when(pl.col("_gap").is_in(hit["_gap"].implode()) & (pl.col("cause").cast(pl.String) == "launch_overhead"))
            .then(pl.lit(FIRST_CALL_CAUSE))
            .otherwise(pl.col("cause").cast(pl.String))
            .alias("cause")
        )
        .drop("_gap")
    )


def _region_table(
    trace: Trace,
    work: pl.DataFrame,
    peaks: devices.DevicePeaks | None,
    gaps: pl.DataFrame | None,
    primary: int,
    first_calls: pl.DataFrame,
) -> tuple[pl.DataFrame, int]:
    regions, left_out = region_spans(trace)
    pairs = assign(regions, work)
    # A region's device: the one its kernels spent most time on (else the busiest device).
    main_device = (
        pairs.group_by("region_id", "device")
        .agg(pl.col("dur_ns").sum().alias("_d"))
        .sort(["region_id", "_d", "device"], descending=[False, True, False])
        .unique("region_id", keep="first")
        .select("region_id", "device")
    )
    pairs = pairs.join(main_device, on=["region_id", "device"], how="semi")
    agg = aggregate(pairs, ["region_id"])
    table = (
        regions.join(main_device, on="region_id", how="left")
        .with_columns(pl.col("device").fill_null(primary))
        .join(agg, on="region_id", how="left")
        .with_columns(
            pl.max_horizontal("host_end_ns", pl.col("last_end_ns").fill_null(pl.col("host_end_ns"))).alias("end_ns"),
            (pl.col("host_end_ns") - pl.col("start_ns")).alias("host_dur_ns"),
            pl.col("kernels").fill_null(0),
            pl.col("kernel_ns").fill_null(0),
        )
    )
    table = behind_queue(trace, _step_device_windows(trace, table)).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
    )
    table = intervals.covered_ns(table, busy_intervals(trace), by=["device"], out="busy_ns")
    table = table.with_columns(
        (pl.col("dur_ns") - pl.col("busy_ns")).clip(lower_bound=0).alias("idle_ns"),
        pl.when(pl.col("dur_ns") > 0).then(pl.col("busy_ns") / pl.col("dur_ns") * 100.0).otherwise(0.0).alias("busy_pct"),
    )
    gaps_ok = gaps is not None
    no_gaps = pl.DataFrame(schema={"device": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64, "cause": pl.String})
    cause_frame = idle_causes(table, _first_call_gaps(gaps, first_calls) if gaps is not None else no_gaps)
    table = table.join(cause_frame, on="region_id", how="left")
    bw = peaks.mem_bw_tbps if peaks else None
    table = table.with_columns(roofline_columns(bw)).with_columns(above_peak_reason(peaks.l2_bytes if peaks else None))
    table = table.join(counter_means(table, counter_windows(trace)), on="region_id", how="left")
    labelled = label_regions(table, roofline_ok=bool(peaks and peaks.complete), gaps_ok=gaps_ok)
    kind_order = {"trace": 0, "step": 1, "compiled": 2, "annotation": 3, "module": 4, "op": 5}
    out = (
        labelled.with_columns(pl.col("kind").replace_strict(kind_order, default=9, return_dtype=pl.Int64).alias("_k"))
        .sort(["_k", "start_ns", "region_id"])
        .select([pl.col(c).cast(t) for c, t in REGION_COLUMNS.items()])
    )
    return out, left_out


# ---- ops and kernels -------------------------------------------------------------------


def _group_table(
    work: pl.DataFrame, keys: list[str], roofline_ok: bool, bw: float | None, l2_bytes: int | None
) -> pl.DataFrame:
    agg = work.group_by(keys).agg(
        pl.col("op_key").n_unique().cast(pl.Int64).alias("calls"),
        # Ties go to the alphabetically first family, not to whichever group_by met first.
        pl.col("family").drop_nulls().mode().sort().first().alias("family"),
        pl.col("cost_source").drop_nulls().first().alias("cost_source"),
    ).join(aggregate(work, keys), on=keys, how="left", nulls_equal=True)
    agg = agg.with_columns(roofline_columns(bw)).with_columns(above_peak_reason(l2_bytes))
    roof_label, roof_score, roof_reason = roofline_label(roofline_ok)
    # Serially launched, work shorter than its launch call leaves the GPU waiting on the host.
    overhead = pl.col("launch_ns").fill_null(0) > pl.col("kernel_ns")
    label = pl.when(overhead).then(pl.lit("overhead")).otherwise(roof_label)
    score = pl.when(overhead).then(pl.lit(1)).otherwise(roof_score)
    reason = (
        pl.when(overhead)
        .then(
            pl.lit("kernels (") + (pl.col("kernel_ns") / 1e3).round(1).cast(pl.String)
            + pl.lit(" µs) shorter than their launch calls (") + (pl.col("launch_ns") / 1e3).round(1).cast(pl.String)
            + pl.lit(" µs): launched one by one they starve the GPU")
        )
        .otherwise(roof_reason)
    )
    return agg.with_columns(label.alias("label"), confidence_text(score).alias("confidence"), reason.alias("reason"))


def _op_table(trace: Trace, work: pl.DataFrame, roofline_ok: bool, bw: float | None, l2_bytes: int | None) -> pl.DataFrame:
    # Calls of one op with the same shapes but other dtypes (fp64, fp32, fp16 mm) run at
    # different peaks: they are separate rows.
    ops = trace.events.select(
        pl.col("id").alias("op_key"),
        pl.col("name").cast(pl.String).alias("op_name"),
        pl.col("input_dims").alias("shapes"),
        pl.col("input_types").alias("dtypes"),
    )
    keyed = (
        work.filter(pl.col("kind") == "kernel")
        .with_columns(pl.coalesce("costed_op_id", "op_id").alias("op_key"))
        .join(ops, on="op_key", how="left")
        .with_columns(
            pl.when(pl.col("op_name").is_not_null())
            .then(pl.col("op_name"))
            .when(pl.col("launch_ts_ns").is_null())
            .then(pl.lit("(launched before the trace)"))
            .otherwise(pl.lit("(no recorded op)"))
            .alias("op_name")
        )
    )
    table = _group_table(keyed, ["op_name", "shapes", "dtypes", "device"], roofline_ok, bw, l2_bytes).rename({"op_name": "name"})
    return (
        table.sort(["kernel_ns", "name", "shapes", "dtypes"], descending=[True, False, False, False], nulls_last=True)
        .select([pl.col(c).cast(t) if c in table.columns else pl.lit(None, dtype=t).alias(c) for c, t in TABLE_COLUMNS.items()])
    )


def _kernel_table(work: pl.DataFrame, roofline_ok: bool, bw: float | None, l2_bytes: int | None) -> pl.DataFrame:
    keyed = work.with_columns(pl.col("id").alias("op_key"))
    table = _group_table(keyed, ["name", "device"], roofline_ok, bw, l2_bytes).with_columns(pl.lit(None, dtype=pl.String).alias("shapes"))
    return (
        table.sort(["kernel_ns", "name"], descending=[True, False])
        .select([pl.col(c).cast(t) if c in table.columns else pl.lit(None, dtype=t).alias(c) for c, t in TABLE_COLUMNS.items()])
    )


# ---- entry point -----------------------------------------------------------------------


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> BoundResult:
    gpu = trace.kernels.filter(pl.col("device").is_not_null())
    if gpu.height == 0:
        return BoundResult(available=False, reason="no GPU kernels, memcpys or memsets in this trace")
    primary = _primary_device(trace)
    assert primary is not None
    work_devices = [int(d) for d in gpu["device"].unique().to_list()]
    props, matched_by = devices.match_device(primary, trace.meta.devices, work_devices)
    # The one device model every analysis asks: vendor, architecture, peaks (user overrides on top).
    model = device_model.from_trace(trace, config, device=primary)
    device_name = model.name or (props.name if props else None)
    peaks = model.peaks
    notes: list[str] = []
    inferred = next((e for e in model.evidence if e.startswith("part inferred as ")), None)
    if peaks is not None and props is not None:
        how = matched_by or "id"
        if inferred:
            how += f"; {inferred}"
        peaks = replace(peaks, matched_by=how)
        if matched_by not in (None, "id"):
            notes.append(
                f"device {primary} has no deviceProperties entry with that id: matched {props.name!r} by {matched_by}"
            )
        if inferred:
            part, _, source = inferred.removeprefix("part inferred as ").partition(" from ")
            basis = "the ISA in its kernel names" if source.startswith("kernel names") else "gcnArchName and CU count"
            notes.append(f"device name {device_name!r} is generic: peaks of {part} inferred from {basis}")
    roofline_ok = bool(peaks and peaks.complete)
    roofline_reason = None
    if not roofline_ok:
        missing = "no peak figures" if peaks is None else "incomplete peak figures (need FLOP/s and bandwidth)"
        roofline_reason = (
            f"{missing} for device {device_name or '?'}: compute/memory labels are unavailable; "
            "give --peak-tflops and --peak-bw or --devices FILE.toml (overhead, host, sync and data labels still apply)"
        )
    if not trace.has_shapes:
        notes.append(
            "no input shapes recorded (record_shapes=False): FLOPs and bytes are unknown, so compute/memory "
            "labels are guessed from kernel families with low confidence"
        )
    work = kernel_work(trace, peaks if roofline_ok else None)
    gaps_result = inputs.maybe("gaps", GapsResult)
    # An unavailable gaps result still carries an (empty) gaps table with the right columns.
    gaps = gaps_result.gaps if gaps_result is not None else None
    gap_reason = None if gaps_result is not None else "the gap analysis did not run"
    outliers = first_call_outliers(trace)
    regions, left_out = _region_table(trace, work, peaks if roofline_ok else None, gaps, primary, outliers)
    if left_out:
        notes.append(f"{left_out} smaller top-level ops are not listed as regions (see --by op)")
    bw = peaks.mem_bw_tbps if roofline_ok and peaks else None
    l2_bytes = peaks.l2_bytes if roofline_ok and peaks else None
    ops = _op_table(trace, work, roofline_ok, bw, l2_bytes)
    kernels = _kernel_table(work, roofline_ok, bw, l2_bytes)
    kernel_time = work.filter(pl.col("kind") == "kernel")
    total = int(kernel_time["dur_ns"].sum() or 0)
    costed = int(kernel_time.filter(pl.col("costed"))["dur_ns"].sum() or 0)
    if total and costed < total:
        uncosted = kernel_time.filter(~pl.col("costed"))
        no_launch = int(uncosted.filter(pl.col("launch_ts_ns").is_null())["dur_ns"].sum() or 0)
        no_op = int(uncosted.filter(pl.col("launch_ts_ns").is_not_null() & pl.col("op_id").is_null())["dur_ns"].sum() or 0)
        if no_launch:
            notes.append(
                f"{100.0 * no_launch / total:.0f}% of kernel time comes from kernels launched before the trace "
                "started: they count as device busy time but belong to no region"
            )
        if no_op:
            notes.append(
                f"{100.0 * no_op / total:.0f}% of kernel time has no recorded op (Triton/Inductor kernels, CUDA graphs): "
                "their bound is guessed from the kernel family"
            )
    if outliers.height:
        top = outliers.row(0, named=True)
        extra_ns = int((outliers["first_ns"] - outliers["steady_ns"]).sum())
        notes.append(
            f"{outliers.height} op(s) ran a one-time first call far above their steady state "
            f"(e.g. {top['name']}: {top['first_ns'] / 1e6:.1f} ms first vs {top['steady_ns'] / 1e6:.3f} ms after; "
            f"{extra_ns / 1e6:.1f} ms in all): initialisation such as cuBLAS handles or autotuning, "
            "not launch overhead of the steady state (see first_calls); the idle it causes is left out of the region labels"
        )
    above = [t.filter(pl.col("above_peak_reason").is_not_null()) for t in (regions, ops, kernels)]
    if any(t.height for t in above):
        first = next(t for t in above if t.height).row(0, named=True)
        notes.append(
            f"{sum(t.height for t in above)} rows read above 100% of roofline (marked ↑; see above_peak_reason), "
            f"e.g. {first['name'][:60]}: {first['above_peak_reason']}"
        )
    return BoundResult(
        device_name=device_name,
        peaks=_peaks_dict(peaks) if peaks else None,
        roofline_available=roofline_ok,
        roofline_reason=roofline_reason,
        gap_causes_available=gaps is not None,
        gap_reason=gap_reason,
        gap_threshold_ns=int(config.gap_threshold_ns),
        cost_coverage_pct=(100.0 * costed / total) if total else None,
        regions=regions,
        ops=ops,
        kernels=kernels,
        notes=tuple(notes),
        first_calls=first_call_rows(outliers),
    )


SPEC = AnalysisSpec(
    name="bound",
    title="Bound: overhead, memory or compute",
    run=run,
    requires=("gaps",),
    description=(
        "Per region, op and kernel: GPU busy share, idle causes, achieved TFLOP/s and TB/s against "
        "the device roofline, and a label (overhead/host/sync/data/memory/compute) with evidence."
    ),
)
