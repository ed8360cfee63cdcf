"""Jupyter display of reports and results: HTML fragments reusing the HTML report's views.

The HTML is a fragment with its own scoped style so it sits well inside a notebook cell. A job
report and a series of runs show the content of their HTML pages (heatmap and tables; plot and
tables) the same way; a report shows its verdict then each section; any other result its
section's view.
"""

from __future__ import annotations

from html import escape

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.render.job.html import job_body, series_body
from traceinsight.render.section_views import section_html
from traceinsight.render.shared import ordered, section_title

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
    title = f"<h4>{escape(section_title(name))}</h4>"
    return f"<div class='ti-nb'>{_STYLE}{title}{section_html(result)}</div>"


def report_html(report: Report) -> str:
    """A report as an HTML fragment: the verdict, then each section."""
    parts = [f"<div class='ti-nb'>{_STYLE}<p class='verdict'>{escape(report.headline.verdict)}</p>"]
    for name, result in ordered(report.sections):
        parts.append(f"<details open><summary><b>{escape(section_title(name))}</b></summary>{section_html(result)}</details>")
    parts.append("</div>")
    return "".join(parts)


def job_html(report: JobReport) -> str:
    """A job report as an HTML fragment: what its HTML page shows, without the page."""
    return f"<div class='ti-nb'>{_STYLE}{job_body(report, heading='h4')}</div>"


def series_html(result: SeriesResult) -> str:
    """A series of runs as an HTML fragment: what its HTML page shows, without the page."""
    return f"<div class='ti-nb'>{_STYLE}{series_body(result, heading='h4')}</div>"
