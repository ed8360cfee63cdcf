"""Jupyter display of reports and results, reusing the HTML report's views.

The HTML is a fragment with its own scoped style so it sits well inside a notebook cell.
A job report (``JobReport``) and a series of runs (``SeriesResult``) show the content of their
HTML pages (heatmap and tables; plot and tables) the same way.
``register()`` hands these functions to ``traceinsight.analysis.core.display``, through which
``Result._repr_html_``, ``Report._repr_html_`` and friends reach them; it also gives a
report's, a job report's and a series' ``to_markdown`` / ``write_html`` / ``write_json`` what
``--format md/html/json`` writes (``formats.render``, the commands' own path).
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.render.job.html import job_body, series_body
from traceinsight.render.section_views import section_html
from traceinsight.render.shared import ordered, section_title

if TYPE_CHECKING:
    from traceinsight.render.formats import Format
    from traceinsight.trace.model import Trace

_STYLE = (
    "<style>.ti-nb dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}"
    ".ti-nb dl.facts dt{font-weight:600}.ti-nb dl.facts dd{margin:0}"
    ".ti-nb .verdict{border-left:4px solid #4e79a7;padding:6px 10px;font-weight:600}"
    ".ti-nb .unavailable{color:#8a5a00}.ti-nb .note{color:#666;font-size:12px}"
    ".ti-nb figcaption{font-weight:600}.ti-nb svg.chart{max-width:900px}</style>"
)


def result_html(result: Result) -> str:
    """One result as an HTML fragment: its plots (when it has a known view), facts and table;
    a series of runs as its page's content."""
    if isinstance(result, SeriesResult):
        return series_html(result)
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


def _result_html(obj: Any) -> str:
    if not isinstance(obj, Result):
        raise TypeError(f"result_html needs a Result, not {type(obj).__name__}")
    return result_html(obj)


def _report_html(obj: Any) -> str:
    if isinstance(obj, JobReport):
        return job_html(obj)
    if not isinstance(obj, Report):
        raise TypeError(f"report_html needs a Report or a JobReport, not {type(obj).__name__}")
    return report_html(obj)


def _report_page(obj: Any, trace: Trace | None = None) -> str:
    if not isinstance(obj, (Report, JobReport, SeriesResult)):
        raise TypeError(
            f"report_page needs a Report, a JobReport or a SeriesResult, not {type(obj).__name__}"
        )
    return _as_written(obj, "html", trace=trace)


def _report_markdown(obj: Any) -> str:
    if not isinstance(obj, (Report, JobReport, SeriesResult)):
        raise TypeError(
            f"report_markdown needs a Report, a JobReport or a SeriesResult, not {type(obj).__name__}"
        )
    return _as_written(obj, "md")


def _report_json(obj: Any) -> str:
    if not isinstance(obj, (Report, JobReport, SeriesResult)):
        raise TypeError(
            f"report_json needs a Report, a JobReport or a SeriesResult, not {type(obj).__name__}"
        )
    return _as_written(obj, "json")


def _as_written(obj: Report | JobReport | SeriesResult, fmt: Format, trace: Trace | None = None) -> str:
    """What ``analyze`` (a trace or a job) or ``compare`` (a series) writes with ``--format fmt``;
    ``trace`` gives a report's HTML page its timeline, memory and counter plots."""
    from traceinsight.render.formats import render_text

    return render_text(obj, fmt, trace=trace)


def register() -> None:
    """Give the analysis layer's display hooks their renderers."""
    from traceinsight.analysis.core import display

    display.register("result_html", _result_html)
    display.register("report_html", _report_html)
    display.register("report_markdown", _report_markdown)
    display.register("report_page", _report_page)
    display.register("report_json", _report_json)
