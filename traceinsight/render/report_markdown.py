"""A report as Markdown: the verdict, the findings, then each section through its view."""

from __future__ import annotations

from traceinsight.analysis.report import Report
from traceinsight.render.markdown import generic_lines
from traceinsight.render.section_views import view_of
from traceinsight.render.shared import ordered, section_title


def render_markdown(report: Report, *, max_rows: int = 10) -> str:
    out = [f"# traceinsight report: `{report.trace_path}`", "", f"**{report.headline.verdict}**", ""]
    for finding in report.headline.findings:
        out.append(f"- {finding.text} _({finding.section})_")
    if report.headline.findings:
        out.append("")
    for name, result in ordered(report.sections):
        out.extend([f"## {section_title(name)}", ""])
        if not result.available:
            out.extend([f"_Not available: {result.reason}_", ""])
            continue
        own = view_of(result).markdown
        if own is not None:
            out.extend(own(result))
            continue
        out.extend(generic_lines(result, max_rows=max_rows))
    return "\n".join(out).rstrip() + "\n"
