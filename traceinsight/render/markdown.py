"""Markdown report: the verdict, the findings, then each other section's facts and the head of its main table.

Meant for pasting into issues, pull requests and wikis, so it is plain GitHub-flavoured
Markdown with no HTML.
"""

from __future__ import annotations

from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.report import Report
from traceinsight.render import generic
from traceinsight.render.sections.findings import ordered
from traceinsight.render.sections.findings import render_markdown as findings_markdown
from traceinsight.render.terminal import section_title


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def md_table(columns: tuple[str, ...] | list[str], rows: tuple[tuple[str, ...], ...] | list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(_escape(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines.extend("| " + " | ".join(_escape(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


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
        if isinstance(result, FindingsResult):
            out.extend(findings_markdown(result))
            continue
        gv = generic.view(result, max_rows=max_rows)
        if gv.facts:
            out.extend(f"- **{key}**: {value}" for key, value in gv.facts)
            out.append("")
        if gv.rows:
            out.extend([md_table(gv.columns, gv.rows), ""])
            if gv.total_rows > len(gv.rows):
                out.extend([f"_{gv.total_rows - len(gv.rows)} more rows in the JSON report._", ""])
    return "\n".join(out).rstrip() + "\n"
