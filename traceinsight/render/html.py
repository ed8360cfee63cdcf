"""Self-contained HTML report: the verdict, plots where a picture beats a table, then tables.

One file with its style inlined and charts as inline SVG: it opens offline, can be attached to
a bug or archived as a CI artifact. Plots are built from the sections' results; the timeline
strip, memory and counter charts also need the trace itself and are left out without it.
Every plot builder tolerates a missing section or column and then draws nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, is_dataclass
from html import escape
from typing import TYPE_CHECKING, Any

import polars as pl

from traceinsight import __version__
from traceinsight.analysis.base import Result
from traceinsight.render import generic, svg
from traceinsight.render.format import ns
from traceinsight.render.terminal import section_title

if TYPE_CHECKING:
    from traceinsight.analysis.report import Report
    from traceinsight.trace.model import Trace

# Idle-gap causes and their colours (shared with the Perfetto export's track names).
CAUSE_COLORS = {
    "busy": "#59a14f",
    "sync": "#e15759",
    "data_loading": "#f28e2b",
    "launch_overhead": "#b07aa1",
    "host_compute": "#9c755f",
    "python": "#edc948",
    "untraced": "#bab0ac",
    "device_wait": "#76b7b2",
    "idle": "#dddddd",
}
BOUND_COLORS = {
    "compute": "#4e79a7",
    "memory": "#f28e2b",
    "overhead": "#e15759",
    "sync": "#b07aa1",
    "host": "#9c755f",
    "data": "#edc948",
    "unknown": "#bab0ac",
}
CATEGORY_COLORS = {"idle": "#cccccc", "compute": "#4e79a7", "communication": "#e15759", "memcpy": "#f28e2b", "memset": "#edc948"}
MAX_TABLE_ROWS = 15


@dataclass(frozen=True)
class Figure:
    title: str
    svg: str
    note: str = ""


# Inlined in every page so the file needs nothing beside it.
CSS = """
:root { color-scheme: light; --fg: #222; --muted: #666; --line: #ddd; --accent: #4e79a7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 20px 40px; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 18px; margin: 0 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.path { color: var(--muted); margin: 0 0 12px; word-break: break-all; }
.verdict { background: #eef4fb; border-left: 4px solid var(--accent); padding: 10px 14px; margin: 12px 0; }
.verdict p { font-size: 16px; font-weight: 600; margin: 0 0 6px; }
.verdict ul { margin: 0; padding-left: 18px; }
.src { color: var(--muted); font-size: 12px; }
nav { display: flex; flex-wrap: wrap; gap: 6px 14px; margin: 8px 0 16px; }
nav a { color: var(--accent); text-decoration: none; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 14px 16px; margin: 14px 0; }
figure { margin: 6px 0 14px; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .muted, .note { fill: var(--muted); color: var(--muted); font-size: 12px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; word-break: break-word; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 8px; text-align: left; white-space: nowrap; }
td { max-width: 420px; overflow: hidden; text-overflow: ellipsis; }
th { background: #f3f3f3; position: sticky; top: 0; }
.unavailable { color: #8a5a00; background: #fff8e6; padding: 6px 10px; border-radius: 4px; }
footer { color: var(--muted); font-size: 12px; margin-top: 24px; }
"""


def _css() -> str:
    return CSS


def _col(frame: pl.DataFrame, *names: str) -> str | None:
    for name in names:
        if name in frame.columns:
            return name
    return None


def _frame(result: Result, *attrs: str) -> pl.DataFrame:
    """The first of ``attrs`` that is a non-empty frame on the result, else its main table."""
    for attr in attrs:
        value = getattr(result, attr, None)
        if isinstance(value, pl.DataFrame) and value.height:
            return value
    return result.to_polars()


# ---- plots from section results -------------------------------------------------------------


def breakdown_figures(result: Result, trace: Trace | None) -> list[Figure]:
    frame = _frame(result, "by_device")
    cat, share = _col(frame, "category"), _col(frame, "share", "share_pct")
    if cat is None or share is None or "device" not in frame.columns:
        return []
    scale = 100.0 if share == "share" else 1.0
    rows = []
    for (device,), part in frame.group_by("device", maintain_order=True):
        parts = [(str(c), float(s or 0.0) * scale) for c, s in part.select(cat, share).iter_rows()]
        rows.append((f"GPU {device}", parts))
    colors = {c: CATEGORY_COLORS.get(c.split("_", 1)[0], svg.color(i + 1)) for i, c in enumerate(frame[cat].unique().sort().to_list())}
    return [Figure("Device time by category", svg.stacked_hbars(rows, colors=colors, label="device time breakdown"))]


def kernels_figures(result: Result, trace: Trace | None) -> list[Figure]:
    figures = []
    frame = _frame(result, "kernels")
    name, total = _col(frame, "name", "kernel"), _col(frame, "total_ns", "dur_ns")
    if name and total and frame.height:
        top = frame.sort(total, descending=True).head(15)
        calls = _col(top, "calls", "count")
        items = [
            (str(r[name]), (r[total] or 0) / 1e6, f"{r[name]}: {ns(r[total])}" + (f" in {r[calls]:,} calls" if calls else ""))
            for r in top.iter_rows(named=True)
        ]
        figures.append(Figure("Top kernels by GPU time", svg.hbars(items, value_label="total GPU time, ms", fmt="{:.2f} ms", label="top kernels")))
    fam = getattr(result, "families", None)
    if isinstance(fam, pl.DataFrame) and fam.height and {"family", "total_ns"} <= set(fam.columns):
        items = [(str(f), (t or 0) / 1e6, f"{f}: {ns(t)}") for f, t in fam.sort("total_ns", descending=True).head(12).select("family", "total_ns").iter_rows()]
        figures.append(Figure("GPU time by kernel family", svg.hbars(items, value_label="total GPU time, ms", fmt="{:.2f} ms", label="kernel families", label_chars=24)))
    return figures


def ops_figures(result: Result, trace: Trace | None) -> list[Figure]:
    frame = _frame(result, "ops")
    name = _col(frame, "name", "op")
    value = _col(frame, "gpu_total_ns", "device_total_ns", "gpu_ns", "host_total_ns")
    if not name or not value or not frame.height:
        return []
    top = frame.filter(pl.col(value) > 0).sort(value, descending=True).head(15)
    items = [(str(n), (v or 0) / 1e6, f"{n}: {ns(v)}") for n, v in top.select(name, value).iter_rows()]
    what = "GPU" if "gpu" in value or "device" in value else "host"
    return [Figure(f"Top operators by {what} time", svg.hbars(items, value_label=f"{what} time, ms", fmt="{:.2f} ms", label="top operators"))] if items else []


STEP_PARTS = (("kernel_ns", "kernels"), ("memcpy_ns", "memcpy"), ("memset_ns", "memset"), ("communication_ns", "communication"))


def steps_figures(result: Result, trace: Trace | None) -> list[Figure]:
    frame = _frame(result, "steps")
    step = _col(frame, "step")
    dur = _col(frame, "device_dur_ns", "dur_ns", "host_dur_ns")
    if not step or not dur or not frame.height:
        return []
    parts = [(c, n) for c, n in STEP_PARTS if c in frame.columns and (frame[c].fill_null(0) > 0).any()]
    if parts:
        busy = pl.sum_horizontal([pl.col(c).fill_null(0) for c, _ in parts])
        data = frame.select(step, *[c for c, _ in parts], idle=(pl.col(dur) - busy).clip(lower_bound=0))
        series = [n for _, n in parts] + ["GPU idle"]
        colors = [svg.color(i) for i in range(len(parts))] + ["#e15759"]
        items = [(f"#{row[0]}", [(v or 0) / 1e6 for v in row[1:]]) for row in data.iter_rows()]
    else:
        series, colors = ["step time"], [svg.color(0)]
        items = [(f"#{s}", [(d or 0) / 1e6]) for s, d in frame.select(step, dur).iter_rows()]
    chart = svg.columns(items, series=series, colors=colors, y_label="ms", label="step times")
    return [Figure("Step time on the device", chart, "Each column is one step from its start to the end of the GPU work it launched; red is GPU idle time inside the step.")]


REGION_LEVELS = ("annotation", "step", "trace")


def bound_figures(result: Result, trace: Trace | None) -> list[Figure]:
    """Roofline: the named regions and the heaviest kernels against the device's roofs."""
    regions = _frame(result, "regions")
    kernels = getattr(result, "kernels", None)
    points: list[svg.Point] = []
    if {"intensity", "tflops", "label", "name"} <= set(regions.columns):
        if "kind" in regions.columns:
            level = next((k for k in REGION_LEVELS if (regions["kind"] == k).any()), None)
            regions = regions.filter(pl.col("kind") == level) if level else regions
        points += [
            svg.Point(x, y, f"region {n}", str(lab)) for n, lab, x, y in regions.select("name", "label", "intensity", "tflops").iter_rows()
            if x and y and x > 0 and y > 0
        ]
    if isinstance(kernels, pl.DataFrame) and {"intensity", "tflops", "label", "name"} <= set(kernels.columns):
        top = kernels.sort("kernel_ns", descending=True, nulls_last=True).head(30) if "kernel_ns" in kernels.columns else kernels.head(30)
        points += [
            svg.Point(x, y, f"kernel {n}", str(lab)) for n, lab, x, y in top.select("name", "label", "intensity", "tflops").iter_rows()
            if x and y and x > 0 and y > 0
        ]
    if not points:
        return []
    roofs: list[tuple[str, float, float]] = []
    peaks = getattr(result, "peaks", None)
    if isinstance(peaks, dict) and isinstance(peaks.get("mem_bw_tbps"), (int, float)):
        bw = float(peaks["mem_bw_tbps"])
        classes = peaks.get("tflops") or {}
        wanted = ["bf16", "fp32"]
        if isinstance(kernels, pl.DataFrame) and "dtype_class" in kernels.columns:
            seen = kernels["dtype_class"].drop_nulls().unique().to_list()
            wanted = [c for c in ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64") if c in seen] or wanted
        # TB/s × FLOP/B = TFLOP/s: the memory roof's slope is the bandwidth in TB/s.
        roofs = [(c, float(classes[c]), bw) for c in wanted if isinstance(classes.get(c), (int, float))][:3]
    chart = svg.loglog_scatter(points, roofs=roofs, colors=dict(BOUND_COLORS), label="roofline")
    return [Figure(
        "Roofline: regions and the heaviest kernels",
        chart,
        "x: FLOPs per byte moved; y: achieved TFLOP/s; lines: the device roofs per data type. Colour is the bound label; hover a dot for its name.",
    )]


TIMELINE_BINS = 900


def _gaps_frame(report: Report, device: int) -> pl.DataFrame:
    """Idle gaps of one device as start_ns, end_ns, cause (empty without a gaps section)."""
    empty = pl.DataFrame(schema={"start_ns": pl.Int64, "end_ns": pl.Int64, "cause": pl.String})
    gaps = report.sections.get("gaps")
    if gaps is None or not gaps.available:
        return empty
    frame = _frame(gaps, "gaps")
    if not {"start_ns", "end_ns", "cause"} <= set(frame.columns):
        return empty
    if "device" in frame.columns:
        frame = frame.filter(pl.col("device") == device)
    return frame.select("start_ns", "end_ns", pl.col("cause").cast(pl.String))


def _per_bin(intervals: pl.DataFrame, lo: int, width: float, bins: int, by: list[str]) -> pl.DataFrame:
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
    from traceinsight.analysis import intervals

    width = (hi - lo) / bins
    work = trace.kernels.filter((pl.col("device") == device) & pl.col("kind").cast(pl.String).is_in(["kernel", "memcpy", "memset"]))
    busy = intervals.union(work.select("ts_ns", "end_ns"), start="ts_ns", end="end_ns").with_columns(cause=pl.lit("busy"))
    gaps = _gaps_frame(report, device)
    parts = pl.concat([busy.select("start_ns", "end_ns", "cause"), gaps], how="vertical_relaxed")
    per_bin = _per_bin(parts, lo, width, bins, ["cause"])
    table = (
        pl.DataFrame({"bin": pl.int_range(0, bins, eager=True)})
        .join(per_bin.pivot(on="cause", index="bin", values="ns"), on="bin", how="left")
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


def timeline_figure(report: Report, trace: Trace) -> Figure | None:
    if not trace.has_gpu:
        return None
    lo = int(trace.kernels["ts_ns"].min())  # type: ignore[arg-type]
    hi = int(trace.kernels["end_ns"].max())  # type: ignore[arg-type]
    overview = report.sections.get("overview")
    if overview is not None and getattr(overview, "window_ns", None):
        lo, hi = int(overview.window_start_ns), int(overview.window_end_ns)  # type: ignore[attr-defined]
    hi = max(hi, lo + 1)
    lanes: list[tuple[str, Sequence[svg.Span]]] = []
    steps = trace.events.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#") & (pl.col("kind") == "user_annotation"))
    if steps.height:
        step_spans = [
            svg.Span((s - lo) / 1e6, (e - lo) / 1e6, svg.color(0) if i % 2 == 0 else "#a0cbe8", f"{n} (host): {ns(e - s)}")
            for i, (n, s, e) in enumerate(steps.sort("ts_ns").select(pl.col("name").cast(pl.String), "ts_ns", "end_ns").iter_rows())
        ]
        lanes.append(("steps (host)", step_spans))
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


def memory_figure(trace: Trace) -> Figure | None:
    mem = trace.memory
    if mem.height == 0:
        return None
    lo = int(mem["ts_ns"].min())  # type: ignore[arg-type]
    series = []
    for (device_type, device), part in mem.sort("ts_ns").group_by("device_type", "device", maintain_order=True):
        if part.height < 2:
            continue
        step = max(part.height // 600, 1)  # keep the page light on long traces
        pts = [((t - lo) / 1e6, v / 2**20) for t, v in part.gather_every(step).select("ts_ns", "total_allocated_bytes").iter_rows() if v is not None]
        where = "CPU" if device_type == 0 else f"GPU {device}"
        series.append((f"{where} allocated (MiB)", pts))
    if not series:
        return None
    return Figure("Allocated memory", svg.lines(series, x_label="ms", y_label="MiB", label="allocated memory"))


def counter_figures(trace: Trace) -> list[Figure]:
    counters = trace.counters
    if counters.height == 0:
        return []
    lo = int(counters["ts_ns"].min())  # type: ignore[arg-type]
    frame = counters.with_columns(pl.col("name").cast(pl.String), pl.col("series").cast(pl.String))
    figures = []
    pct_rows = frame.filter(pl.col("series").str.ends_with("_pct"))
    groups = (
        ("NVML utilisation", pl.col("name").str.starts_with("nvml"), "NVML: share of time any kernel ran (utilization.gpu) and the memory controller was busy."),
        ("GPM activity (Hopper and newer)", pl.col("name").str.starts_with("gpm"), "GPM: SM, tensor-core, DRAM and occupancy activity, each averaged since the previous sample."),
        ("Other utilisation counters", ~pl.col("name").str.starts_with("nvml") & ~pl.col("name").str.starts_with("gpm"), ""),
    )
    for title, selector, note in groups:
        rows = pct_rows.filter(selector)
        series = []
        silent = []
        for (name, ser, device), part in rows.sort("ts_ns").group_by("name", "series", "device", maintain_order=True):
            pts = [((t - lo) / 1e6, v) for t, v in part.select("ts_ns", "value").iter_rows() if v is not None]
            label = f"{name}.{ser}" + (f" (GPU {device})" if len(trace.gpu_devices) > 1 else "")
            # All-zero series (e.g. FP64 activity in a bf16 run) only clutter the chart.
            if any(v for _, v in pts):
                series.append((label, pts))
            else:
                silent.append(label)
        if not series:
            continue
        extra = f" Always 0, not drawn: {', '.join(silent)}." if silent else ""
        chart = svg.lines(series, x_label="ms since first sample", y_label="%", y_max=100.0, label=title.lower())
        figures.append(Figure(title, chart, (note + extra).strip()))
    for unit_suffix, title, unit in (("_w", "Power", "W"), ("_mhz", "Clocks", "MHz"), ("_c", "Temperature", "°C")):
        rows = frame.filter(pl.col("series").str.ends_with(unit_suffix))
        if rows.height == 0:
            continue
        series = [
            (f"{name}.{ser}", [((t - lo) / 1e6, v) for t, v in part.select("ts_ns", "value").iter_rows() if v is not None])
            for (name, ser), part in rows.sort("ts_ns").group_by("name", "series", maintain_order=True)
        ]
        figures.append(Figure(title, svg.lines(series, x_label="ms since first sample", y_label=unit, label=title.lower())))
    return figures


FIGURE_BUILDERS: dict[str, Callable[[Result, Any], list[Figure]]] = {
    "breakdown": breakdown_figures,
    "kernels": kernels_figures,
    "ops": ops_figures,
    "steps": steps_figures,
    "bound": bound_figures,
}


# ---- page assembly ----------------------------------------------------------------------------


def _figure_html(fig: Figure) -> str:
    note = f"<p class='note'>{escape(fig.note)}</p>" if fig.note else ""
    return f"<figure><figcaption>{escape(fig.title)}</figcaption>{fig.svg}{note}</figure>"


def table_html(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def facts_html(items: Sequence[tuple[str, str]]) -> str:
    if not items:
        return ""
    return "<dl class='facts'>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items) + "</dl>"


def result_html(result: Result, figures: Sequence[Figure] = ()) -> str:
    """One result as HTML: figures, facts, the head of its table (also used in notebooks)."""
    if not result.available:
        return f"<p class='unavailable'>Not available: {escape(str(result.reason))}</p>"
    gv = generic.view(result, max_rows=MAX_TABLE_ROWS, max_cols=12)
    parts = [_figure_html(f) for f in figures]
    parts.append(facts_html(gv.facts))
    if gv.rows:
        parts.append(table_html(gv.columns, gv.rows))
        if gv.total_rows > len(gv.rows):
            parts.append(f"<p class='note'>{gv.total_rows - len(gv.rows):,} more rows in the JSON report or <code>result.to_polars()</code>.</p>")
    return "".join(parts)


def section_figures(name: str, result: Result, trace: Trace | None) -> list[Figure]:
    builder = FIGURE_BUILDERS.get(name)
    if builder is None or not result.available:
        return []
    return builder(result, trace)


def page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{_css()}</style></head>"
        f"<body><main>{body}<footer>traceinsight {escape(__version__)}</footer></main></body></html>"
    )


def render_html(report: Report, trace: Trace | None = None) -> str:
    """The whole report as one self-contained HTML page (``trace`` adds timeline/memory/counters)."""
    head = report.headline
    findings = "".join(f"<li>{escape(f.text)} <span class='src'>({escape(f.section)})</span></li>" for f in head.findings)
    nav = "".join(f"<a href='#{escape(n)}'>{escape(section_title(n))}</a>" for n in report.sections)
    parts = [
        f"<h1>traceinsight report</h1><p class='path'>{escape(report.trace_path)}</p>",
        f"<div class='verdict'><p>{escape(head.verdict)}</p><ul>{findings}</ul></div>",
        f"<nav>{nav}</nav>",
    ]
    if trace is not None:
        timeline = timeline_figure(report, trace)
        if timeline is not None:
            parts.append(f"<section id='timeline'><h2>Timeline</h2>{_figure_html(timeline)}</section>")
    for name, result in report.sections.items():
        figures = section_figures(name, result, trace)
        parts.append(f"<section id='{escape(name)}'><h2>{escape(section_title(name))}</h2>{result_html(result, figures)}</section>")
    if trace is not None:
        extra = [f for f in (memory_figure(trace), *counter_figures(trace)) if f is not None]
        if extra:
            parts.append("<section id='counters'><h2>Memory and GPU counters</h2>" + "".join(_figure_html(f) for f in extra) + "</section>")
    return page(f"traceinsight: {report.trace_path}", "".join(parts))


# ---- diff ---------------------------------------------------------------------------------------


def _diff_rows(frame: pl.DataFrame) -> list[tuple[str, float, str]]:
    name = _col(frame, "name", "op", "region", "kernel", "category", "cause", "key")
    delta = _col(frame, "delta_ns_per_step", "delta_ns", "diff_ns", "change_ns")
    before = _col(frame, "before_ns_per_step", "before_ns")
    after = _col(frame, "after_ns_per_step", "after_ns")
    if not name or not (delta or (before and after)):
        return []
    d = pl.col(delta) if delta else pl.col(str(after)) - pl.col(str(before))
    top = frame.with_columns(_d=d).filter(pl.col("_d").is_not_null()).sort(pl.col("_d").abs(), descending=True).head(20)
    return [(str(r[name]), r["_d"] / 1e6, f"{r[name]}: {'+' if r['_d'] >= 0 else ''}{ns(r['_d'])}") for r in top.iter_rows(named=True)]


def _diff_frames(result: Any) -> list[tuple[str, pl.DataFrame]]:
    """Every non-empty table of a diff result, nested parts included, with a readable name."""
    found = []
    for key, value in vars(result).items():
        if isinstance(value, pl.DataFrame) and value.height:
            found.append((key.replace("_", " "), value))
        elif is_dataclass(value) and not isinstance(value, type) and getattr(value, "available", True):
            for sub, frame in vars(value).items():
                if isinstance(frame, pl.DataFrame) and frame.height and sub != "steps":
                    found.append((key.replace("_", " ") + ("" if sub == "table" else f" {sub.replace('_', ' ')}"), frame))
    return found


def _step_chart(result: Any) -> Figure | None:
    steps = getattr(getattr(result, "step_time", None), "steps", None)
    if not isinstance(steps, pl.DataFrame) or not {"before_ns", "after_ns"} <= set(steps.columns) or steps.height == 0:
        return None
    index = steps["index"].to_list() if "index" in steps.columns else list(range(steps.height))
    before = getattr(result, "before_label", "before") or "before"
    after = getattr(result, "after_label", "after") or "after"
    series = [
        (before, [(float(i), v / 1e6) for i, v in zip(index, steps["before_ns"].to_list(), strict=True) if v is not None]),
        (after, [(float(i), v / 1e6) for i, v in zip(index, steps["after_ns"].to_list(), strict=True) if v is not None]),
    ]
    return Figure("Step time, before and after", svg.lines(series, x_label="step (index)", y_label="ms", label="step times before and after"))


def render_diff_html(diff_result: Result, *, title: str = "traceinsight diff") -> str:
    """A diff result as a self-contained HTML page: verdict, step times, change charts, tables."""
    before = getattr(diff_result, "before_label", None) or "before"
    after = getattr(diff_result, "after_label", None) or "after"
    parts = [f"<h1>{escape(title)}</h1><p class='path'>{escape(str(before))} → {escape(str(after))}</p>"]
    if not diff_result.available:
        parts.append(f"<p class='unavailable'>Not available: {escape(str(diff_result.reason))}</p>")
        return page(title, "".join(parts))
    verdict = getattr(diff_result, "verdict", None)
    step_time = getattr(diff_result, "step_time", None)
    change = getattr(step_time, "change_pct", None)
    reason = getattr(step_time, "verdict_reason", "")
    if verdict:
        text = str(verdict).replace("_", " ")
        if isinstance(change, (int, float)):
            text += f": step time {change:+.1f} %"
        notes = "".join(f"<li>{escape(str(n))}</li>" for n in getattr(diff_result, "notes", ()) or ())
        parts.append(f"<div class='verdict'><p>{escape(text)}</p><ul><li>{escape(str(reason))}</li>{notes}</ul></div>")
    gv = generic.view(diff_result, max_rows=MAX_TABLE_ROWS, max_cols=12)
    parts.append(facts_html(gv.facts))
    chart = _step_chart(diff_result)
    if chart is not None:
        parts.append(_figure_html(chart))
    for key, frame in _diff_frames(diff_result):
        rows = _diff_rows(frame)
        section = [f"<section><h2>{escape(key.capitalize())}</h2>"]
        if rows:
            section.append(_figure_html(Figure(f"Change in {key} per step ({after} − {before})", diverging_bars(rows), "Red: more time after; green: less.")))
        cols, body = generic.table(frame, max_rows=MAX_TABLE_ROWS, max_cols=12)
        section.append(table_html(cols, body) + "</section>")
        parts.append("".join(section))
    return page(title, "".join(parts))


def diverging_bars(items: Sequence[tuple[str, float, str]], *, width: int = 900) -> str:
    """Bars left (improvement, green) or right (regression, red) of a zero line, in ms."""
    left_label, bar_h, gap = 300, 14, 5
    plot_w = width - left_label - 20
    mid = left_label + plot_w / 2
    vmax = max((abs(v) for _, v, _ in items), default=0.0) or 1.0
    height = 8 + len(items) * (bar_h + gap)
    body = [f"<line x1='{mid:.1f}' x2='{mid:.1f}' y1='0' y2='{height}' stroke='#888'/>"]
    for i, (name, value, tip) in enumerate(items):
        y = 4 + i * (bar_h + gap)
        w = abs(value) / vmax * (plot_w / 2 - 60)
        x = mid if value >= 0 else mid - w
        fill = "#e15759" if value > 0 else "#59a14f"
        body.append(f"<text x='{left_label - 6}' y='{y + bar_h * 0.8:.1f}' text-anchor='end'>{escape(name[:46])}</text>")
        body.append(f"<rect x='{x:.1f}' y='{y}' width='{max(w, 0.6):.1f}' height='{bar_h}' fill='{fill}'><title>{escape(tip)}</title></rect>")
        tx = x + w + 4 if value >= 0 else x - 4
        body.append(f"<text x='{tx:.1f}' y='{y + bar_h * 0.8:.1f}' text-anchor='{'start' if value >= 0 else 'end'}'>{value:+.3g} ms</text>")
    return (
        f"<svg class='chart' role='img' aria-label='change chart' viewBox='0 0 {width} {height}' width='100%' "
        f"xmlns='http://www.w3.org/2000/svg' {svg.FONT}>" + "".join(body) + "</svg>"
    )

