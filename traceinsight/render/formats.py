"""The one place that turns a report, diff or command result into an output format.

Commands call :func:`check`, then :func:`show` (live terminal), :func:`render` (text or bytes)
or :func:`write` (a file, written atomically); nothing else picks a renderer.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Literal

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.compare import DiffResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.atomic import write_atomic
from traceinsight.errors import UsageError
from traceinsight.render import envelope
from traceinsight.render.documents import BoundListing, CompileReport, GapsListing, QueryRows
from traceinsight.render.envelope import Document, Kind
from traceinsight.render.terminal import NARROW, make_console, report_renderable, section_renderable
from traceinsight.trace.model import Trace

Format = Literal["terminal", "json", "md", "html", "csv", "perfetto"]

# Formats each kind of output can be written in, as the commands accept them.
FORMATS: dict[Kind, tuple[Format, ...]] = {
    "report": ("terminal", "json", "md", "html"),
    "diff": ("terminal", "json", "md", "html"),
    "gaps": ("terminal", "json"),
    "bound": ("terminal", "json"),
    "compile": ("terminal", "json"),
    "sql": ("terminal", "csv", "json"),
    "job": ("terminal", "json", "md", "html", "perfetto"),
    "series": ("terminal", "json", "md", "html"),
}

# Width of terminal text written to a file or a string (no terminal to measure); None lets
# rich take $COLUMNS or 80.
_TEXT_WIDTH: dict[Kind, int | None] = {"report": 100, "diff": 140, "compile": 140, "gaps": 100, "bound": 100, "sql": None, "job": 100, "series": 120}


def kind_of(obj: Document) -> Kind:
    if isinstance(obj, JobReport):
        return "job"
    if isinstance(obj, SeriesResult):
        return "series"
    if isinstance(obj, Report):
        return "report"
    if isinstance(obj, DiffResult):
        return "diff"
    if isinstance(obj, GapsListing):
        return "gaps"
    if isinstance(obj, BoundListing):
        return "bound"
    if isinstance(obj, CompileReport):
        return "compile"
    return "sql"


def check(kind: Kind, fmt: str, *, names: dict[str, Format] | None = None) -> Format:
    """``fmt`` as a format of ``kind`` (``names`` maps a command's own spellings), else a usage error."""
    spelled = {f: f for f in FORMATS[kind]} | ({k: v for k, v in names.items() if v in FORMATS[kind]} if names else {})
    if fmt not in spelled:
        choices = list(names) if names else list(FORMATS[kind])
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(choices)}")
    return spelled[fmt]


# ---- terminal ---------------------------------------------------------------------------------


def _gaps_renderable(listing: GapsListing) -> RenderableType:
    from traceinsight.render.sections.gaps import gaps_table, render_terminal

    result = listing.result
    if not result.available:
        return Text(f"not available: {result.reason}", style="yellow")
    title = f"{listing.listed.height:,} of {result.gap_count:,} gaps (start from window start)"
    return Group(render_terminal(result, include_top=False), gaps_table(listing.listed, title=title, origin_ns=result.window_start_ns))


def _bound_renderable(listing: BoundListing) -> RenderableType:
    from traceinsight.render.sections.bound import render_by

    result = listing.result
    body = render_by(result, listing.by, limit=listing.limit) if result.available else Text(f"not available: {result.reason}", style="yellow")
    return Panel(body, title=f"[bold]Bound by {listing.by}[/bold]", title_align="left", expand=True)


def _rows_renderable(rows: QueryRows) -> RenderableType:
    frame = rows.rows
    table = Table(box=None, pad_edge=False)
    for col, dtype in frame.schema.items():
        numeric = dtype.is_numeric()
        table.add_column(col, overflow="fold", justify="right" if numeric else "left", no_wrap=numeric)
    for row in frame.iter_rows():
        table.add_row(*("" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    return Group(table, Text(f"{frame.height:,} row(s)", style="dim"))


def renderable(obj: Document, *, narrow: bool = False) -> RenderableType:
    """``obj`` as a rich renderable for the terminal."""
    if isinstance(obj, (JobReport, SeriesResult)):
        from traceinsight.render.job_terminal import job_renderable, series_renderable

        return job_renderable(obj) if isinstance(obj, JobReport) else series_renderable(obj)
    if isinstance(obj, Report):
        return report_renderable(obj, narrow=narrow)
    if isinstance(obj, DiffResult):
        from traceinsight.render.diff_terminal import render_terminal

        return render_terminal(obj)
    if isinstance(obj, GapsListing):
        return _gaps_renderable(obj)
    if isinstance(obj, BoundListing):
        return _bound_renderable(obj)
    if isinstance(obj, CompileReport):
        return section_renderable("compile", obj.result)
    return _rows_renderable(obj)


def show(obj: Document, console: Console | None = None) -> None:
    """Print ``obj`` on a live terminal (stdout unless ``console`` is given), colours and width of it."""
    console = console or make_console()
    console.print(renderable(obj, narrow=console.width < NARROW))


def terminal_text(obj: Document, *, width: int | None = None) -> str:
    """The terminal view as plain text, ``width`` columns wide (a default per kind without one)."""
    width = width or _TEXT_WIDTH[kind_of(obj)]
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, color_system=None, soft_wrap=False, highlight=False)
    console.print(renderable(obj, narrow=console.width < NARROW))
    return buf.getvalue()


# ---- every format ------------------------------------------------------------------------------


def render(obj: Document, fmt: Format, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> str:
    """``obj`` as text in ``fmt``; ``trace`` adds the HTML report's timeline, memory and counter plots,
    ``top`` is the number of rows per table of a diff's Markdown."""
    if fmt not in FORMATS[kind_of(obj)]:
        raise UsageError(f"a {kind_of(obj)} cannot be written as {fmt}; choose from {', '.join(FORMATS[kind_of(obj)])}")
    if fmt == "json":
        return envelope.dumps(obj)
    if fmt == "terminal":
        return terminal_text(obj, width=width)
    if fmt == "csv" and isinstance(obj, QueryRows):
        return obj.rows.write_csv()
    if isinstance(obj, (JobReport, SeriesResult)) and fmt in ("md", "html"):
        return _job_text(obj, fmt)
    if fmt == "md" and isinstance(obj, Report):
        from traceinsight.render.markdown import render_markdown

        return render_markdown(obj)
    if fmt == "md" and isinstance(obj, DiffResult):
        from traceinsight.render.diff_markdown import render_markdown as render_diff_markdown

        return render_diff_markdown(obj, top=top)
    if fmt == "html" and isinstance(obj, Report):
        from traceinsight.render.html import render_html

        return render_html(obj, trace)
    if fmt == "html" and isinstance(obj, DiffResult):
        from traceinsight.render.html import render_diff_html

        return render_diff_html(obj)
    raise UsageError(f"a {kind_of(obj)} cannot be written as {fmt}")


def _job_text(obj: JobReport | SeriesResult, fmt: Format) -> str:
    if fmt == "md":
        from traceinsight.render.job_markdown import job_markdown, series_markdown

        return job_markdown(obj) if isinstance(obj, JobReport) else series_markdown(obj)
    from traceinsight.render.html.job import render_job_html, render_series_html

    return render_job_html(obj) if isinstance(obj, JobReport) else render_series_html(obj)


def perfetto(trace: Trace, report: Report | None = None) -> bytes:
    """The trace (plus the report's gaps, steps and bound tracks) as a Perfetto ``.pftrace``."""
    from traceinsight.render.perfetto_export import export_perfetto

    return export_perfetto(trace, report)


def perfetto_job(report: JobReport) -> bytes:
    """A job's ranks as one Perfetto ``.pftrace``: one process per rank on a common clock."""
    from traceinsight.render.perfetto_job import export_job_perfetto

    return export_job_perfetto(report)


def write(obj: Document, fmt: Format, path: Path, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> None:
    """``render(obj, fmt, ...)`` written to ``path`` atomically."""
    write_atomic(render(obj, fmt, width=width, trace=trace, top=top), path)
