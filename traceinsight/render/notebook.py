"""Jupyter display of reports and results (``_repr_html_``), reusing the HTML report's views.

The HTML is a fragment with its own scoped style so it sits well inside a notebook cell.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from traceinsight.render import html as html_report
from traceinsight.render.terminal import section_title

if TYPE_CHECKING:
    from traceinsight.analysis.base import Result
    from traceinsight.analysis.report import Report

_STYLE = (
    "<style>.ti-nb dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}"
    ".ti-nb dl.facts dt{font-weight:600}.ti-nb dl.facts dd{margin:0}"
    ".ti-nb .verdict{border-left:4px solid #4e79a7;padding:6px 10px;font-weight:600}"
    ".ti-nb .unavailable{color:#8a5a00}.ti-nb .note{color:#666;font-size:12px}"
    ".ti-nb figcaption{font-weight:600}.ti-nb svg.chart{max-width:900px}</style>"
)


def result_html(result: Result) -> str:
    """One result as an HTML fragment: its plots (when it has a known view), facts and table."""
    name = type(result).name
    figures = html_report.section_figures(name, result, None)
    title = f"<h4>{escape(section_title(name))}</h4>"
    return f"<div class='ti-nb'>{_STYLE}{title}{html_report.result_html(result, figures)}</div>"


def report_html(report: Report) -> str:
    """A report as an HTML fragment: the verdict, then each section."""
    parts = [f"<div class='ti-nb'>{_STYLE}<p class='verdict'>{escape(report.headline.verdict)}</p>"]
    for name, result in report.sections.items():
        figures = html_report.section_figures(name, result, None)
        parts.append(f"<details open><summary><b>{escape(section_title(name))}</b></summary>{html_report.result_html(result, figures)}</details>")
    parts.append("</div>")
    return "".join(parts)
