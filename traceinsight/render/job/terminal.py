"""A job report and a series of runs on the terminal (fits 80 columns)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.render.job import view as job_view
from traceinsight.render.section_views import job_tables
from traceinsight.render.views import Table

# Columns that hold free text (folded) rather than numbers (right-aligned).
_TEXT_COLUMNS = {"part", "id", "what", "trace", "verdict", "finding (saving)", "idle mostly", "conf.", "work before"}


def _table(table: Table) -> RenderableType:
    out = RichTable(title=table.title, title_justify="left", title_style="bold", box=None, pad_edge=False)
    for col in table.columns:
        text = col in _TEXT_COLUMNS
        out.add_column(col, justify="left" if text else "right", overflow="fold", no_wrap=not text)
    for row in table.rows:
        out.add_row(*row)
    parts: list[RenderableType] = [out]
    if table.note:
        parts.append(Text(table.note, style="dim"))
    parts.append(Text(""))
    return Group(*parts)


def job_renderable(report: JobReport) -> RenderableType:
    parts: list[RenderableType] = [Text(job_view.headline(report), style="bold"), Text("")]
    for line in job_view.failed_lines(report):
        parts.append(Text(f"not analysed: {line}", style="red"))
    parts.extend(_table(t) for t in job_tables(report.sections))
    for fix in job_view.finding_fixes(report):
        parts.append(Text(f"fix {fix}"))
    return Group(*parts)


def series_renderable(result: SeriesResult) -> RenderableType:
    parts: list[RenderableType] = [Text(job_view.series_headline(result), style="bold"), Text("")]
    for line in result.failed:
        parts.append(Text(f"not analysed: {line}", style="red"))
    parts.extend(_table(table) for table in job_view.series_tables(result))
    return Group(*parts)
