"""What each kind of document is shown with: its terminal view (and the width of its terminal
text), its Markdown and its HTML view, by the document's type. The output formats
(``render/outputs/``) read this table; it imports none of them."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.compare import DiffResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.documents import (
    BoundListing,
    CompileReport,
    GapsListing,
    QueryRows,
    WhatIfReport,
)
from traceinsight.render.envelope import Document, Kind
from traceinsight.render.terminal import NARROW, report_renderable, section_renderable
from traceinsight.trace.model import Trace


@dataclass(frozen=True)
class DocumentKind:
    """How one kind of document is shown: the width of its terminal text written to a file or a
    string (None lets rich take $COLUMNS or 80), and its views. The formats it can be written in
    are those of the format registry that list its kind."""

    kind: Kind
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
    Report: DocumentKind("report", 100, _report_terminal, _report_md, _report_html),
    DiffResult: DocumentKind("diff", 140, _diff_terminal, _diff_md, _diff_html),
    GapsListing: DocumentKind("gaps", 100, lambda obj, narrow: _gaps_renderable(obj)),
    BoundListing: DocumentKind("bound", 100, lambda obj, narrow: _bound_renderable(obj)),
    CompileReport: DocumentKind("compile", 140, _compile_terminal),
    WhatIfReport: DocumentKind("whatif", 120, _whatif_terminal),
    QueryRows: DocumentKind("sql", None, lambda obj, narrow: _rows_renderable(obj)),
    JobReport: DocumentKind("job", 100, _job_terminal, _job_md, _job_html),
    SeriesResult: DocumentKind("series", 120, _series_terminal, _series_md, _series_html),
    SnapshotReport: DocumentKind("memory_snapshot", 120, _snapshot_terminal, _snapshot_md, _snapshot_html),
}
# Formats each kind of output can be written in, as the commands accept them.

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


def terminal_text(obj: Document, *, width: int | None = None) -> str:
    """The terminal view as plain text, ``width`` columns wide (a default per kind without one)."""
    width = width or document_kind(obj).width
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, color_system=None, soft_wrap=False, highlight=False)
    console.print(renderable(obj, narrow=console.width < NARROW))
    return buf.getvalue()

