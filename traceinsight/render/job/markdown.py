"""A job report and a series of runs as GitHub-flavoured Markdown."""

from __future__ import annotations

from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.render.job import view as job_view
from traceinsight.render.markdown import md_table
from traceinsight.render.section_views import job_tables
from traceinsight.render.views import Table


def _section(table: Table) -> list[str]:
    out = [f"## {table.title}", ""]
    if table.rows:
        out.extend([md_table(table.columns, list(table.rows)), ""])
    if table.note:
        out.extend([f"_{table.note}_", ""])
    return out


def job_markdown(report: JobReport) -> str:
    name = report.paths[0] if report.paths else "job"
    out = [f"# traceinsight job report: `{name}` and {max(len(report.paths) - 1, 0)} more rank(s)", "", f"**{job_view.headline(report)}**", ""]
    failed = job_view.failed_lines(report)
    if failed:
        out.extend(f"- not analysed: {line}" for line in failed)
        out.append("")
    for table in job_tables(report.sections):
        out.extend(_section(table))
    fixes = job_view.finding_fixes(report)
    if fixes:
        out.extend(["## Fixes", ""])
        out.extend(f"- {fix}" for fix in fixes)
        out.append("")
    return "\n".join(out)


def series_markdown(result: SeriesResult) -> str:
    out = ["# traceinsight compare", "", f"**{job_view.series_headline(result)}**", ""]
    if result.failed:
        out.extend(f"- not analysed: {line}" for line in result.failed)
        out.append("")
    for table in job_view.series_tables(result):
        out.extend(_section(table))
    return "\n".join(out)
