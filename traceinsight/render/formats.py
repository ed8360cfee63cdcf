"""The one place that turns a report, diff or command result into an output format.

Commands call :func:`check`, then :func:`show` (live terminal), :func:`render` (text or bytes)
or :func:`write` (a file, written atomically); nothing else picks a renderer. The formats
themselves are the renderer objects of ``render/outputs/registry.py``; each renders any
:class:`~traceinsight.render.document.Document` of a kind it lists.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from traceinsight.analysis.report import Report
from traceinsight.atomic import write_atomic
from traceinsight.errors import UsageError
from traceinsight.render.document import Kind
from traceinsight.render.outputs import registry as outputs
from traceinsight.render.outputs.base import RenderOptions
from traceinsight.render.report_documents import as_document, renderable
from traceinsight.render.terminal import NARROW, make_console
from traceinsight.trace.model import Trace

# A format's name, as ``--format`` takes it (``render/outputs/registry.py`` lists them).
Format = str


def check(kind: Kind, fmt: str | None, *, names: dict[str, Format] | None = None, output: Path | None = None) -> Format:
    """``fmt`` as a format of ``kind`` (``names`` maps a command's own spellings), else a usage error.

    Without ``fmt``, ``output``'s suffix names the format (``-o report.html`` writes HTML); a
    suffix no format claims, or no output at all, gives the terminal text. A binary format
    needs ``output``: it is not written to a terminal."""
    taken = outputs.formats_of(kind)
    if fmt is None:
        found = outputs.by_suffix(output.suffix) if output is not None else None
        if found is None:
            return "terminal"
        if found.name not in taken:
            raise UsageError(f"a {kind} cannot be written as {found.name} ({output}); give --format, one of {', '.join(taken)}")
        return found.name
    spelled = {f: f for f in taken} | ({k: v for k, v in names.items() if v in taken} if names else {})
    if "md" in taken:
        spelled.setdefault("markdown", "md")  # the name people type, beside the short one
    fmt = fmt.strip().lower()  # -f HTML, -f Json: a format's name is no case-sensitive token
    if fmt not in spelled:
        choices = list(names) if names else list(taken)
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(choices)}")
    chosen = outputs.get(spelled[fmt])
    if chosen.binary and output is None:
        raise UsageError(f"-f {chosen.name} writes a binary file: give it with -o FILE{chosen.suffixes[0]}")
    return chosen.name


def formats_of(kind: Kind) -> tuple[Format, ...]:
    """The formats ``kind`` can be written in now (a format registered later included)."""
    return outputs.formats_of(kind)


def on_terminal() -> bool:
    """Whether stdout is a terminal a person reads (not a pipe or a file)."""
    return sys.stdout.isatty()


def show(obj: object, console: Console | None = None, *, glance: bool = False) -> None:
    """Print ``obj`` on a live terminal (stdout unless ``console`` is given), colours and width of it.

    ``glance``: a report's first screen only (verdict, findings, a line per section)."""
    console = console or make_console()
    narrow = console.width < NARROW
    if glance and isinstance(obj, Report):
        from traceinsight.render.glance import glance_renderable

        console.print(glance_renderable(obj, narrow=narrow, width=console.width))
        return
    console.print(renderable(obj, narrow=narrow))


# ---- every format ------------------------------------------------------------------------------


def render(obj: object, fmt: Format, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> str | bytes:
    """``obj`` (a document, or an analysis result it wraps) in ``fmt`` (text, or bytes for a
    binary format); ``trace`` gives the HTML report its timeline, memory and counter plots when
    the report's own reference to its trace is gone, ``top`` is the number of rows per table of
    a diff's Markdown."""
    doc = as_document(obj)
    taken = outputs.formats_of(doc.kind)
    if fmt not in taken:
        raise UsageError(f"a {doc.kind} cannot be written as {fmt}; choose from {', '.join(taken)}")
    return outputs.get(fmt).render(doc, RenderOptions(width=width, trace=trace, top=top))


def render_text(obj: object, fmt: Format, **options: Any) -> str:
    """``render`` of a text format (not a binary one)."""
    text = render(obj, fmt, **options)
    if isinstance(text, bytes):
        raise UsageError(f"{fmt} is a binary format, not text")
    return text


def perfetto(trace: Trace, report: Report | None = None) -> bytes:
    """The trace (plus the report's gaps, steps and bound tracks) as a Perfetto ``.pftrace``."""
    from traceinsight.render.perfetto_export import export_perfetto

    return export_perfetto(trace, report)


def write(obj: object, fmt: Format, path: Path, *, width: int | None = None, trace: Trace | None = None, top: int = 8) -> None:
    """``render(obj, fmt, ...)`` written to ``path`` atomically."""
    write_atomic(render(obj, fmt, width=width, trace=trace, top=top), path)
