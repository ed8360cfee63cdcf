"""The GPU timeline strip: each device's lane downsampled into equal time bins."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceinsight.analysis.report import Report
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.render import svg
from traceinsight.render.html.page import Figure
from traceinsight.render.html.styles import CAUSE_COLORS
from traceinsight.render.parts import section_of
from traceinsight.render.units import ns
from traceinsight.trace.model import Trace

TIMELINE_BINS = 900


def _gaps_frame(report: Report, device: int) -> pl.DataFrame:
    """Idle gaps of one device as start_ns, end_ns, cause (empty without a gaps section)."""
    empty = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "cause": pl.String})
    gaps = section_of(report, GapsResult)
    if gaps is None or not gaps.available:
        return empty
    frame = gaps.gaps.filter(pl.col("device") == device)
    return frame.select("start_ns", "end_ns", pl.col("cause").cast(pl.String))


def per_bin(intervals: pl.DataFrame, lo: int, width: float, bins: int, by: list[str]) -> pl.DataFrame:
    """Time each group of intervals covers in each of ``bins`` equal bins starting at ``lo``."""
    if intervals.height == 0:
        return pl.DataFrame(schema={**{k: pl.String for k in by}, "bin": pl.Int64, "ns": pl.Float64})
    rel = intervals.with_columns(s=(pl.col("start_ns") - lo).cast(pl.Float64), e=(pl.col("end_ns") - lo).cast(pl.Float64))
    return (
        rel.with_columns(
            bin=pl.int_ranges(
                (pl.col("s") / width).floor().cast(pl.Int64).clip(0, bins - 1),
                (pl.col("e") / width).ceil().cast(pl.Int64).clip(1, bins),
            )
        )
        .explode("bin")
        .with_columns(
            ns=(pl.min_horizontal(pl.col("e"), (pl.col("bin") + 1) * width) - pl.max_horizontal(pl.col("s"), pl.col("bin") * width)).clip(lower_bound=0)
        )
        .group_by([*by, "bin"])
        .agg(pl.col("ns").sum())
    )


def _device_lane(trace: Trace, report: Report, device: int, lo: int, hi: int, bins: int) -> tuple[list[svg.Span], set[str]]:
    """One device's lane, downsampled honestly: each bin shows what most of its time was.

    Busy time is the union of kernels, copies and memsets; idle time is split by the cause of
    the gap it falls in ("idle" for gaps below the report's threshold). A bin is green when
    the GPU was busy for at least half of it, else coloured by its largest idle cause.
    """
    from traceinsight.analysis.lib import intervals

    width = (hi - lo) / bins
    work = trace.kernels.filter((pl.col("device") == device) & pl.col("kind").cast(pl.String).is_in(["kernel", "memcpy", "memset"]))
    busy = intervals.union(work.select("ts_ns", "end_ns"), start="ts_ns", end="end_ns").with_columns(cause=pl.lit("busy"))
    gaps = _gaps_frame(report, device)
    parts = pl.concat([busy.select("start_ns", "end_ns", "cause"), gaps], how="vertical_relaxed")
    covered = per_bin(parts, lo, width, bins, ["cause"])
    table = (
        pl.DataFrame({"bin": pl.int_range(0, bins, eager=True)})
        .join(covered.pivot(on="cause", index="bin", values="ns"), on="bin", how="left")
        .fill_null(0.0)
    )
    causes = [c for c in table.columns if c not in ("bin", "busy")]
    busy_col = pl.col("busy") if "busy" in table.columns else pl.lit(0.0)
    untracked = (pl.lit(width) - busy_col - pl.sum_horizontal([pl.col(c) for c in causes] or [pl.lit(0.0)])).clip(lower_bound=0)
    table = table.with_columns(busy=busy_col, idle=untracked)
    idle_cols = [*causes, "idle"]
    table = table.with_columns(
        state=pl.when(pl.col("busy") >= width / 2)
        .then(pl.lit("busy"))
        .otherwise(pl.concat_list([pl.struct(c=pl.lit(c), v=pl.col(c)) for c in idle_cols]).list.eval(pl.element().sort_by(pl.element().struct.field("v"), descending=True).first().struct.field("c")).list.first()),
        busy_pct=100.0 * pl.col("busy") / width,
    )
    # Run-length encode equal neighbouring bins so the SVG stays small.
    runs = (
        table.with_columns(run=(pl.col("state") != pl.col("state").shift(1)).fill_null(True).cum_sum())
        .group_by("run", maintain_order=True)
        .agg(pl.col("state").first(), pl.col("bin").min().alias("b0"), pl.col("bin").max().alias("b1"), pl.col("busy_pct").mean())
    )
    spans = [
        svg.Span(b0 * width / 1e6, (b1 + 1) * width / 1e6, CAUSE_COLORS.get(state, "#dddddd"), f"{state}: GPU busy {busy_pct:.0f} % of {ns((b1 + 1 - b0) * width)}")
        for state, b0, b1, busy_pct in runs.select("state", "b0", "b1", "busy_pct").iter_rows()
    ]
    return spans, set(table.select(pl.col("state").unique()).to_series().to_list()) - {"busy"}


def timeline_window(report: Report, trace: Trace) -> tuple[int, int] | None:
    """(start_ns, end_ns) of the timeline's axis: the trace window, else the kernels' span;
    the counter and memory charts share it."""
    overview = section_of(report, OverviewResult)
    if overview is not None and overview.window_ns:
        return overview.window_start_ns, max(overview.window_end_ns, overview.window_start_ns + 1)
    if not trace.has_gpu:
        return None
    lo = int(trace.kernels["ts_ns"].min())  # type: ignore[arg-type]
    return lo, max(int(trace.kernels["end_ns"].max()), lo + 1)  # type: ignore[arg-type]


def timeline_figure(report: Report, trace: Trace) -> Figure | None:
    if not trace.has_gpu:
        return None
    window = timeline_window(report, trace)
    assert window is not None
    lo, hi = window
    lanes: list[tuple[str, Sequence[svg.Span]]] = []
    steps = trace.events.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#") & (pl.col("kind") == "user_annotation"))
    if steps.height:
        step_spans = [
            svg.Span((s - lo) / 1e6, (e - lo) / 1e6, svg.color(0) if i % 2 == 0 else "#a0cbe8", f"{n} (host): {ns(e - s)}")
            for i, (n, s, e) in enumerate(steps.sort("ts_ns").select(pl.col("name").cast(pl.String), "ts_ns", "end_ns").iter_rows())
        ]
        lanes.append(("steps (host)", step_spans))
    elif trace.iterations is not None:
        # no ProfilerStep: the loop iterations found at load stand in for steps
        iteration_spans = [
            svg.Span((s - lo) / 1e6, (e - lo) / 1e6, svg.color(0) if i % 2 == 0 else "#a0cbe8", f"iteration {n} (host): {ns(e - s)}")
            for i, (n, s, e) in enumerate(trace.step_spans().select("step", "host_start_ns", "host_end_ns").iter_rows())
        ]
        lanes.append(("iterations (host)", iteration_spans))
    shown: set[str] = set()
    for device in trace.gpu_devices:
        spans, states = _device_lane(trace, report, device, lo, hi, TIMELINE_BINS)
        shown |= states
        lanes.append((f"GPU {device}", spans))
    legend = [("busy", CAUSE_COLORS["busy"])] + [
        (f"idle: {c}" if c != "idle" else "idle (short gaps)", CAUSE_COLORS.get(c, "#dddddd")) for c in sorted(shown)
    ]
    chart = svg.strip(lanes, lo=0.0, hi=(hi - lo) / 1e6, unit="ms", legend_items=legend, label="GPU timeline")
    note = (
        f"Each GPU lane is cut into {TIMELINE_BINS} slices of {ns((hi - lo) / TIMELINE_BINS)}: green where the GPU "
        "ran kernels or copies for at least half of the slice, otherwise the cause of most of its idle time. Hover for details."
    )
    return Figure("GPU timeline", chart, note)

