"""The HTML page of a diff: verdict, step times before and after, change charts, tables."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import polars as pl

from traceinsight.analysis.diff.compare import DiffResult, StepTimeDiff
from traceinsight.render import generic, svg
from traceinsight.render.diff.findings import render_html as findings_html
from traceinsight.render.diff.view import headline, signed_ns, step_rows
from traceinsight.render.html.page import (
    MAX_TABLE_ROWS,
    Figure,
    facts_html,
    figure_html,
    page,
    table_html,
)
from traceinsight.render.units import ns

# The per-step delta charts: table title → (column naming each row, column of the change per
# step, None where it is after − before). Tables without a per-step change (bound labels,
# memory peaks, compile metrics) are shown as tables only.
CHARTED: dict[str, tuple[str, str | None]] = {
    "breakdown": ("category", "delta_ns_per_step"),
    "idle by cause": ("cause", "delta_ns_per_step"),
    "ops": ("op", "delta_ns_per_step"),
    "kernels": ("name", "delta_ns_per_step"),
    "regions": ("region", "delta_ns_per_step"),
    "compile region speedups": ("region", None),
}


def _diff_rows(frame: pl.DataFrame, name: str, delta: str | None) -> list[tuple[str, float, str]]:
    d = pl.col(delta) if delta is not None else pl.col("after_ns_per_step") - pl.col("before_ns_per_step")
    top = frame.with_columns(_d=d).filter(pl.col("_d").is_not_null()).sort(pl.col("_d").abs(), descending=True).head(20)
    return [(str(r[name]), r["_d"] / 1e6, f"{r[name]}: {'+' if r['_d'] >= 0 else ''}{ns(r['_d'])}") for r in top.iter_rows(named=True)]


def diff_tables(result: DiffResult) -> list[tuple[str, pl.DataFrame]]:
    """Every non-empty table of a diff result, in the result's field order, with a readable name."""
    candidates: list[tuple[str, pl.DataFrame, bool]] = [
        ("breakdown", result.breakdown.table, result.breakdown.available),
        ("idle by cause", result.idle_by_cause.table, result.idle_by_cause.available),
        ("ops", result.ops, True),
        ("kernels", result.kernels, True),
        ("regions", result.regions, True),
        ("bound", result.bound.table, result.bound.available),
        ("memory", result.memory.table, result.memory.available),
        ("compile metrics", result.compile.metrics, result.compile.available),
        ("compile region speedups", result.compile.region_speedups, result.compile.available),
    ]
    return [(title, _for_reading(frame)) for title, frame, available in candidates if available and frame.height]


# Columns of the contribution tables under the names people read: each counts kernels (an op's
# or a region's kernels per step), and a share of the delta is a percentage (it can pass 100 %
# or go below 0 where other rows move the other way).
_READING_NAMES = {
    "before_calls_per_step": "before_kernels_per_step",
    "after_calls_per_step": "after_kernels_per_step",
    "share_of_delta": "delta_share",
}


def _for_reading(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.rename({k: v for k, v in _READING_NAMES.items() if k in frame.columns})


def _step_chart(result: DiffResult) -> Figure | None:
    steps = result.step_time.steps
    if steps.height == 0:
        return None
    index = steps["index"].to_list()
    before = result.before_label or "before"
    after = result.after_label or "after"
    series = [
        (before, [(float(i), v / 1e6) for i, v in zip(index, steps["before_ns"].to_list(), strict=True) if v is not None]),
        (after, [(float(i), v / 1e6) for i, v in zip(index, steps["after_ns"].to_list(), strict=True) if v is not None]),
    ]
    return Figure("Step time, before and after", svg.lines(series, x_label="step (index)", y_label="ms", label="step times before and after"))


def step_stats_html(st: StepTimeDiff, before: str, after: str) -> str:
    """The step statistics behind the verdict: steps kept after warm-up, outliers flagged (kept,
    not dropped), the total time of the kept steps, mean and median."""
    title = f"<h2>Step time ({escape(st.metric.replace('_dur_ns', ''))})</h2>"
    if not st.available:
        return f"<section>{title}<p class='unavailable'>Not available: {escape(str(st.reason))}</p></section>"
    rows = [list(row.cells) for row in step_rows(st)]
    return f"<section>{title}{table_html(['', before, after, 'change'], rows)}</section>"


def render_diff_html(diff_result: DiffResult, *, title: str = "traceinsight diff") -> str:
    """A diff result as a self-contained HTML page: verdict, step times, change charts, tables."""
    before = diff_result.before_label or "before"
    after = diff_result.after_label or "after"
    parts = [f"<h1>{escape(title)}</h1><p class='path'>{escape(before)} → {escape(after)}</p>"]
    if not diff_result.available:
        parts.append(f"<p class='unavailable'>Not available: {escape(str(diff_result.reason))}</p>")
        return page(title, "".join(parts))
    step_time = diff_result.step_time
    head = headline(diff_result)
    items = [head.reason, *diff_result.notes]
    notes = "".join(f"<li>{escape(n)}</li>" for n in items if n)
    parts.append(f"<div class='verdict'><p>{escape(head.text)}</p>{f'<ul>{notes}</ul>' if notes else ''}</div>")
    parts.append(step_stats_html(step_time, before, after))
    chart = _step_chart(diff_result)
    if chart is not None:
        parts.append(figure_html(chart))
    parts.append(findings_html(diff_result.findings, before, after))
    for key, frame in diff_tables(diff_result):
        charted = CHARTED.get(key)
        rows = _diff_rows(frame, *charted) if charted is not None else []
        section = [f"<section><h2>{escape(key.capitalize())}</h2>"]
        if rows:
            section.append(figure_html(Figure(f"Change in {key} per step ({after} − {before})", diverging_bars(rows), "Red: more time after; green: less.")))
        cols, body = generic.table(frame, max_rows=MAX_TABLE_ROWS, max_cols=12)
        section.append(table_html(cols, body) + "</section>")
        parts.append("".join(section))
    # The raw figures behind the cards, for reference: after them, not before, and only the
    # ones with a value.
    gv = generic.view(diff_result, max_rows=MAX_TABLE_ROWS, max_cols=12)
    facts = [(k, v) for k, v in gv.facts if v not in ("", "-", "None")]
    if facts:
        parts.append(f"<section><details><summary>All figures ({len(facts)})</summary>{facts_html(facts)}</details></section>")
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
        w = abs(value) / vmax * (plot_w / 2 - 80)  # room for the value label beside the longest bar
        x = mid if value >= 0 else mid - w
        fill = "#e15759" if value > 0 else "#59a14f"
        body.append(f"<text x='{left_label - 6}' y='{y + bar_h * 0.8:.1f}' text-anchor='end'>{escape(svg._short(name, 46))}</text>")
        body.append(f"<rect x='{x:.1f}' y='{y}' width='{max(w, 0.6):.1f}' height='{bar_h}' fill='{fill}'><title>{escape(tip)}</title></rect>")
        tx = x + w + 4 if value >= 0 else x - 4
        body.append(f"<text x='{tx:.1f}' y='{y + bar_h * 0.8:.1f}' text-anchor='{'start' if value >= 0 else 'end'}'>{signed_ns(value * 1e6)}</text>")
    return (
        f"<svg class='chart' role='img' aria-label='change chart' viewBox='0 0 {width} {height}' width='100%' "
        f"xmlns='http://www.w3.org/2000/svg' {svg.FONT}>" + "".join(body) + "</svg>"
    )

