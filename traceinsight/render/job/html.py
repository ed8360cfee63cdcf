"""A job report and a series of runs as self-contained HTML pages: a ranks × steps heatmap of
device step time with the stragglers marked, the per-rank table, collective wait, findings;
for a series, the median step per run with its interval."""

from __future__ import annotations

from html import escape

from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.render import svg
from traceinsight.render.html.page import Figure, figure_html, page, table_html
from traceinsight.render.job import view as job_view
from traceinsight.render.section_views import job_tables
from traceinsight.render.units import ns
from traceinsight.render.views import Table


def _mix(lo: tuple[int, int, int], hi: tuple[int, int, int], t: float) -> str:
    r, g, b = (round(a + (c - a) * t) for a, c in zip(lo, hi, strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(report: JobReport, *, width: int = 900) -> str:
    """Ranks (rows) × steps (columns), coloured by device step time; a black frame marks the
    rank that held each step back."""
    ranks, steps, cells = job_view.step_grid(report)
    if not cells:
        return ""
    marked = job_view.stragglers_by_step(report)
    left, top, right, bottom = 56, 24, 10, 30
    row_h = max(8.0, min(24.0, 480 / len(ranks)))
    height = int(top + row_h * len(ranks) + bottom)
    cell_w = (width - left - right) / len(steps)
    lo, hi = min(cells.values()), max(cells.values())
    span = max(hi - lo, 1)
    body: list[str] = []
    for j, step in enumerate(steps):
        if len(steps) <= 40 or j % -(-len(steps) // 40) == 0:
            body.append(svg._text(left + (j + 0.5) * cell_w, height - bottom + 14, str(step), "middle"))
    for i, rank in enumerate(ranks):
        y = top + i * row_h
        if len(ranks) <= 64 or i % -(-len(ranks) // 64) == 0:
            body.append(svg._text(left - 4, y + row_h * 0.7, f"rank {rank}", "end"))
        for j, step in enumerate(steps):
            dur = cells.get((rank, step))
            if dur is None:
                continue
            fill = _mix((0xF7, 0xFB, 0xFF), (0x08, 0x30, 0x6B), (dur - lo) / span)
            x = left + j * cell_w
            body.append(svg._rect(x, y, cell_w - 1, row_h - 1, fill, f"rank {rank}, step {step}: {ns(dur)}"))
            if marked.get(step) == rank:
                body.append(
                    f"<rect x='{x + 1:.2f}' y='{y + 1:.2f}' width='{max(cell_w - 3, 0):.2f}' height='{max(row_h - 3, 0):.2f}' "
                    "fill='none' stroke='#e15759' stroke-width='2'><title>straggler of this step</title></rect>"
                )
    body.append(svg._text(left, 14, f"device step time: light {ns(lo)} … dark {ns(hi)}; red frame: the step's straggler", cls="muted"))
    body.append(svg._text(width - right, height - 2, "step", "end", "muted"))
    return svg._svg(width, height, body, "device step time per rank and step")


def _section(table: Table, heading: str = "h2") -> str:
    parts = [f"<section><{heading}>{escape(table.title)}</{heading}>"]
    if table.rows:
        parts.append(table_html(table.columns, table.rows))
    if table.note:
        parts.append(f"<p class='note'>{escape(table.note)}</p>")
    return "".join(parts) + "</section>"


def job_body(report: JobReport, *, heading: str = "h2") -> str:
    """The job report's content (verdict, heatmap, tables) without the page around it; the
    page and the notebook view both show this."""
    parts = [f"<div class='verdict'><p>{escape(job_view.headline(report))}</p>"]
    failed = job_view.failed_lines(report)
    fixes = job_view.finding_fixes(report)
    items = [f"not analysed: {line}" for line in failed] + fixes
    if items:
        parts.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>")
    parts.append("</div>")
    chart = heatmap(report)
    if chart:
        parts.append(figure_html(Figure("Device step time per rank", chart, "Each cell is one rank's step; hover for the time.")))
    parts.extend(_section(t, heading) for t in job_tables(report.sections))
    return "".join(parts)


def render_job_html(report: JobReport, *, title: str = "traceinsight job report") -> str:
    head = f"<h1>{escape(title)}</h1><p class='path'>{escape(', '.join(report.paths))}</p>"
    return page(title, head + job_body(report))


def series_chart(result: SeriesResult, *, width: int = 900) -> str:
    """Median step per run (ms) as columns, labelled by run number."""
    items = [
        (f"run {r['run']}", [float(r["step_median_ns"] or 0.0) / 1e6])
        for r in result.runs.iter_rows(named=True)
    ]
    return svg.columns(items, series=["median step"], y_label="ms", width=width, label="median step time per run")


def series_body(result: SeriesResult, *, heading: str = "h2") -> str:
    """The series' content (verdict, plot, tables) without the page around it; the page and
    the notebook view both show this."""
    parts = [f"<div class='verdict'><p>{escape(job_view.series_headline(result))}</p>"]
    if result.failed:
        parts.append("<ul>" + "".join(f"<li>not analysed: {escape(line)}</li>" for line in result.failed) + "</ul>")
    parts.append("</div>")
    if result.runs.height and "runs" in result.sections:
        parts.append(figure_html(Figure("Median step time per run", series_chart(result), "Run 0 is the baseline of every ratio.")))
    parts.extend(_section(table, heading) for table in job_view.series_tables(result))
    return "".join(parts)


def render_series_html(result: SeriesResult, *, title: str = "traceinsight compare") -> str:
    return page(title, f"<h1>{escape(title)}</h1>" + series_body(result))
