"""Self-contained HTML report: the verdict, plots where a picture beats a table, then tables.

One file with its style inlined and charts as inline SVG: it opens offline, can be attached to
a bug or archived as a CI artifact. Plots are built from the sections' results; the timeline
strip, memory and counter charts also need the trace itself: without it, the page says that
they are not available (with it, each is left out when the trace has no data for it).
"""

from __future__ import annotations

from html import escape

from traceinsight.analysis.report import Report
from traceinsight.render.html.counters import counter_figures, memory_figure
from traceinsight.render.html.page import figure_html, page
from traceinsight.render.html.timeline import timeline_figure, timeline_window
from traceinsight.render.section_views import section_html
from traceinsight.render.shared import ordered, section_title
from traceinsight.trace.model import Trace

# In place of the plots drawn from the trace, on a page rendered without it (a report written
# from Python after its trace was freed, or unpickled).
NO_TRACE_SECTION = (
    "<section id='timeline'><h2>Timeline, memory and GPU counters</h2>"
    "<p class='unavailable'>Not available: the trace was not at hand when this page was written; "
    "report.write_html(path, trace=traceinsight.load(...)) draws these plots.</p></section>"
)


def render_html(report: Report, trace: Trace | None = None) -> str:
    """The whole report as one self-contained HTML page (``trace`` adds timeline/memory/counters)."""
    head = report.headline
    nav = "".join(f"<a href='#{escape(n)}'>{escape(section_title(n))}</a>" for n, _ in ordered(report.sections))
    parts = [
        f"<h1>traceinsight report</h1><p class='path'>{escape(report.trace_path)}</p>",
        # The verdict once: its clauses again as bullets filled a phone's first screen twice over.
        f"<div class='verdict'><p>{escape(head.verdict)}</p></div>",
        f"<nav>{nav}</nav>",
    ]
    if trace is not None:
        timeline = timeline_figure(report, trace)
        if timeline is not None:
            parts.append(f"<section id='timeline'><h2>Timeline</h2>{figure_html(timeline)}</section>")
    else:
        parts.append(NO_TRACE_SECTION)
    for name, result in ordered(report.sections):
        parts.append(f"<section id='{escape(name)}'><h2>{escape(section_title(name))}</h2>{section_html(result)}</section>")
    if trace is not None:
        window = timeline_window(report, trace)
        extra = [f for f in (memory_figure(trace, window), *counter_figures(trace, window)) if f is not None]
        if extra:
            parts.append("<section id='counters'><h2>Memory and GPU counters</h2>" + "".join(figure_html(f) for f in extra) + "</section>")
    return page(f"traceinsight: {report.trace_path}", "".join(parts))

