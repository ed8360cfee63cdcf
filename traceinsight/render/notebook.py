"""The analysis layer's display hooks, answered through the documents.

``register()`` hands these functions to ``traceinsight.analysis.core.display``, through which
``Result._repr_html_``, ``Report._repr_html_`` and friends reach them. Notebook display is the
document's ``fragment()`` (``render/fragments.py``), or a plain result's section view; a report's,
a job report's and a series' ``to_markdown`` / ``write_html`` / ``write_json`` are what
``--format md/html/json`` writes (``formats.render``, the commands' own path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traceinsight.analysis.core.base import Result
from traceinsight.render.document import Document
from traceinsight.render.fragments import result_html
from traceinsight.render.report_documents import wrap

if TYPE_CHECKING:
    from traceinsight.render.formats import Format
    from traceinsight.trace.model import Trace


def _display_html(obj: Any) -> str:
    """``obj`` in a notebook cell: its document's fragment, else its section's view."""
    doc = obj if isinstance(obj, Document) else wrap(obj)
    fragment = doc.fragment() if doc is not None else None
    if fragment is not None:
        return fragment
    if not isinstance(obj, Result):
        raise TypeError(f"no notebook view of a {type(obj).__name__}")
    return result_html(obj)


def _as_written(obj: Any, fmt: Format, trace: Trace | None = None) -> str:
    """What ``analyze`` (a trace or a job) or ``compare`` (a series) writes with ``--format fmt``;
    ``trace`` gives a report's HTML page its timeline, memory and counter plots."""
    from traceinsight.render.formats import render_text

    return render_text(obj, fmt, trace=trace)


def _report_page(obj: Any, trace: Trace | None = None) -> str:
    return _as_written(obj, "html", trace=trace)


def _report_markdown(obj: Any) -> str:
    return _as_written(obj, "md")


def _report_json(obj: Any) -> str:
    return _as_written(obj, "json")


def register() -> None:
    """Give the analysis layer's display hooks their renderers."""
    from traceinsight.analysis.core import display

    display.register("result_html", _display_html)
    display.register("report_html", _display_html)
    display.register("report_markdown", _report_markdown)
    display.register("report_page", _report_page)
    display.register("report_json", _report_json)
