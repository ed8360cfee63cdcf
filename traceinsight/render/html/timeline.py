"""The GPU timeline strip: each device's lane downsampled into equal time bins."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceinsight.analysis.lib.timeline_bins import device_runs, host_steps
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


def _device_lane(trace: Trace, report: Report, device: int, lo: int, hi: int, bins: int) -> tuple[list[svg.Span], set[str]]:
    """One device's lane, downsampled honestly (``analysis.lib.timeline_bins``): each run of
    bins drawn in the colour of what most of their time was."""
    width = (hi - lo) / bins
    runs = device_runs(trace, _gaps_frame(report, device), device, lo, hi, bins)
    spans = [
        svg.Span(b0 * width / 1e6, (b1 + 1) * width / 1e6, CAUSE_COLORS.get(state, "#dddddd"), f"{state}: GPU busy {busy_pct:.0f} % of {ns((b1 + 1 - b0) * width)}")
        for state, b0, b1, busy_pct in runs.select("state", "b0", "b1", "busy_pct").iter_rows()
    ]
    return spans, set(runs["state"].unique().to_list()) - {"busy"}


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
    what, steps = host_steps(trace)
    if steps.height:
        step_spans = [
            svg.Span((s - lo) / 1e6, (e - lo) / 1e6, svg.color(0) if i % 2 == 0 else "#a0cbe8", f"{label} (host): {ns(e - s)}")
            for i, (label, s, e) in enumerate(steps.iter_rows())
        ]
        lanes.append((f"{what} (host)", step_spans))
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

