"""The one place that turns a report, diff or command result into an output format.

Commands call :func:`check`, then :func:`show` (live terminal), :func:`render` (text or bytes)
or :func:`write` (a file, written atomically); nothing else picks a renderer.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.compare import DiffResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.atomic import write_atomic
from traceinsight.errors import UsageError
from traceinsight.render import envelope
from traceinsight.render.documents import (
    BoundListing,
    CompileReport,
    GapsListing,
    QueryRows,
    WhatIfReport,
)
from traceinsight.render.envelope import Document, Kind
from traceinsight.render.terminal import NARROW, make_console, report_renderable, section_renderable
from traceinsight.trace.model import Trace

Format = Literal["terminal", "json", "md", "html", "csv", "perfetto"]


@dataclass(frozen=True)
class DocumentKind:
    """How one kind of document is written: the formats it takes, the width of its terminal text
    written to a file or a string (None lets rich take $COLUMNS or 80), and its views. JSON goes
    through :mod:`envelope` for every kind, Perfetto through :func:`perfetto_job`."""

    kind: Kind
    formats: tuple[Format, ...]
    width: int | None
    terminal: Callable[[Any, bool], RenderableType]  # (document, narrow)
    md: Callable[[Any, int], str] | None = None  # (document, rows per table)
    html: Callable[[Any, Trace | None], str] | None = None  # (document, trace for a report's plots)


def _job_terminal(obj: JobReport, narrow: bool) -> RenderableType:
    from traceinsight.render.job.terminal import job_renderable

    return job_renderable(obj)


def _series_terminal(obj: SeriesResult, narrow: bool) -> RenderableType:
    from traceinsight.render.job.terminal import series_renderable

    return series_renderable(obj)


def _diff_terminal(obj: DiffResult, narrow: bool) -> RenderableType:
    from traceinsight.render.diff.terminal import render_terminal

    return render_terminal(obj)


def _report_terminal(obj: Report, narrow: bool) -> RenderableType:
    return report_renderable(obj, narrow=narrow)


def _compile_terminal(obj: CompileReport, narrow: bool) -> RenderableType:
    return section_renderable("compile", obj.result)


def _report_md(obj: Report, top: int) -> str:
    from traceinsight.render.report_markdown import render_markdown

    return render_markdown(obj)


def _diff_md(obj: DiffResult, top: int) -> str:
    from traceinsight.render.diff.markdown import render_markdown

    return render_markdown(obj, top=top)


def _job_md(obj: JobReport, top: int) -> str:
    from traceinsight.render.job.markdown import job_markdown

    return job_markdown(obj)


def _series_md(obj: SeriesResult, top: int) -> str:
    from traceinsight.render.job.markdown import series_markdown

    return series_markdown(obj)


def _report_html(obj: Report, trace: Trace | None) -> str:
    from traceinsight.render.html.report import render_html

    return render_html(obj, trace)


def _diff_html(obj: DiffResult, trace: Trace | None) -> str:
    from traceinsight.render.diff.html import render_diff_html

    return render_diff_html(obj)


def _job_html(obj: JobReport, trace: Trace | None) -> str:
    from traceinsight.render.job.html import render_job_html

    return render_job_html(obj)


def _series_html(obj: SeriesResult, trace: Trace | None) -> str:
    from traceinsight.render.job.html import render_series_html

    return render_series_html(obj)


# A file's suffix names the format it is written in when ``--format`` is not given.
SUFFIXES: dict[str, Format] = {
    ".json": "json", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".csv": "csv", ".pftrace": "perfetto",
}


def check(kind: Kind, fmt: str | None, *, names: dict[str, Format] | None = None, output: Path | None = None) -> Format:
    """``fmt`` as a format of ``kind`` (``names`` maps a command's own spellings), else a usage error.

    Without ``fmt``, ``output``'s suffix names the format (``-o report.html`` writes HTML); a
    suffix no format claims (``.txt``, none) or no output at all gives the terminal text."""
    if fmt is None:
        by_suffix = SUFFIXES.get(output.suffix.lower()) if output is not None else None
        if by_suffix is None:
            return "terminal"
        if by_suffix not in FORMATS[kind]:
            raise UsageError(f"a {kind} cannot be written as {by_suffix} ({output}); give --format, one of {', '.join(FORMATS[kind])}")
        return by_suffix
    spelled = {f: f for f in FORMATS[kind]} | ({k: v for k, v in names.items() if v in FORMATS[kind]} if names else {})
    fmt = fmt.strip().lower()  # -f HTML, -f Json: a format's name is no case-sensitive token
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


def _whatif_terminal(obj: WhatIfReport, narrow: bool) -> RenderableType:
    from traceinsight.render.whatif_view import render_terminal

    return render_terminal(obj.result)


def _rows_renderable(rows: QueryRows) -> RenderableType:
    frame = rows.rows
    table = Table(box=None, pad_edge=False)
    for col, dtype in frame.schema.items():
        numeric = dtype.is_numeric()
        table.add_column(col, overflow="fold", justify="right" if numeric else "left", no_wrap=numeric)
    for row in frame.iter_rows():
        table.add_row(*("" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
    return Group(table, Text(f"{frame.height:,} row(s)", style="dim"))


def _snapshot_terminal(obj: SnapshotReport, narrow: bool) -> RenderableType:
    from traceinsight.render.snapshot.terminal import render_terminal

    return render_terminal(obj)


def _snapshot_md(obj: SnapshotReport, top: int) -> str:
    from traceinsight.render.snapshot.markdown import render_markdown

    return render_markdown(obj, top=max(top, 10))


def _snapshot_html(obj: SnapshotReport, trace: Trace | None) -> str:
    from traceinsight.render.snapshot.html import render_html

    return render_html(obj)


# Every kind of document, by its type: the one table every format choice reads.
DOCUMENTS: dict[type, DocumentKind] = {
    Report: DocumentKind("report", ("terminal", "json", "md", "html"), 100, _report_terminal, _report_md, _report_html),
    DiffResult: DocumentKind("diff", ("terminal", "json", "md", "html"), 140, _diff_terminal, _diff_md, _diff_html),
    GapsListing: DocumentKind("gaps", ("terminal", "json"), 100, lambda obj, narrow: _gaps_renderable(obj)),
    BoundListing: DocumentKind("bound", ("terminal", "json"), 100, lambda obj, narrow: _bound_renderable(obj)),
    CompileReport: DocumentKind("compile", ("terminal", "json"), 140, _compile_terminal),
    WhatIfReport: DocumentKind("whatif", ("terminal", "json"), 120, _whatif_terminal),
    QueryRows: DocumentKind("sql", ("terminal", "csv", "json"), None, lambda obj, narrow: _rows_renderable(obj)),
    JobReport: DocumentKind("job", ("terminal", "json", "md", "html", "perfetto"), 100, _job_terminal, _job_md, _job_html),
    SeriesResult: DocumentKind("series", ("terminal", "json", "md", "html"), 120, _series_terminal, _series_md, _series_html),
    SnapshotReport: DocumentKind("memory_snapshot", ("terminal", "json", "md", "html"), 120, _snapshot_terminal, _snapshot_md, _snapshot_html),
}
# Formats each kind of output can be written in, as the commands accept them.
FORMATS: dict[Kind, tuple[Format, ...]] = {d.kind: d.formats for d in DOCUMENTS.values()}


def document_kind(obj: Document) -> DocumentKind:
    for cls in type(obj).__mro__:
        found = DOCUMENTS.get(cls)
        if found is not None:
            return found
    raise TypeError(f"not a document traceinsight writes: {type(obj).__name__}")


def kind_of(obj: Document) -> Kind:
    return document_kind(obj).kind


def renderable(obj: Document, *, narrow: bool = False) -> RenderableType:
    """``obj`` as a rich renderable for the terminal."""
    return document_kind(obj).terminal(obj, narrow)


def on_terminal() -> bool:
    """Whether stdout is a terminal a person reads (not a pipe or a file)."""
    return sys.stdout.isatty()


def show(obj: Document, console: Console | None = None, *, glance: bool = False) -> None:
    """Print ``obj`` on a live terminal (stdout unless ``console`` is given), colours and width of it.

    ``glance``: a report's first screen only (verdict, findings, a line per section)."""
    console = console or make_console()
    narrow = console.width < NARROW
    if glance and isinstance(obj, Report):
        from traceinsight.render.glance import glance_renderable

        console.print(glance_renderable(obj, narrow=narrow))
        return
    console.print(renderable(obj, narrow=narrow))


def terminal_text(obj: Document, *, width: int | None = None) -> str:
    """The terminal view as plain text, ``width`` columns wide (a default per kind without one)."""
    width = width or document_kind(obj).width
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, color_system=None, soft_wrap=False, highlight=False)
    console.print(renderable(obj, narrow=console.width < NARROW))
    return buf.getvalue()


# ---- every format ------------------------------------------------------------------------------


def render(obj: Document, fmt: Format, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> str:
    """``obj`` as text in ``fmt``; ``trace`` adds the HTML report's timeline, memory and counter plots,
    ``top`` is the number of rows per table of a diff's Markdown."""
    doc = document_kind(obj)
    if fmt not in doc.formats:
        raise UsageError(f"a {doc.kind} cannot be written as {fmt}; choose from {', '.join(doc.formats)}")
    if fmt == "json":
        return envelope.dumps(obj)
    if fmt == "terminal":
        return terminal_text(obj, width=width)
    if fmt == "csv" and isinstance(obj, QueryRows):
        return obj.rows.write_csv()
    if fmt == "md" and doc.md is not None:
        return doc.md(obj, top)
    if fmt == "html" and doc.html is not None:
        return doc.html(obj, trace)
    raise UsageError(f"a {doc.kind} cannot be written as {fmt}")


def perfetto(trace: Trace, report: Report | None = None) -> bytes:
    """The trace (plus the report's gaps, steps and bound tracks) as a Perfetto ``.pftrace``."""
    from traceinsight.render.perfetto_export import export_perfetto

    return export_perfetto(trace, report)


def perfetto_job(report: JobReport) -> bytes:
    """A job's ranks as one Perfetto ``.pftrace``: one process per rank on a common clock."""
    from traceinsight.render.job.perfetto import export_job_perfetto

    return export_job_perfetto(report)


def write(obj: Document, fmt: Format, path: Path, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> None:
    """``render(obj, fmt, ...)`` written to ``path`` atomically."""
    write_atomic(render(obj, fmt, width=width, trace=trace, top=top), path)
