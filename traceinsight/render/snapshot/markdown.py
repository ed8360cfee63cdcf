"""The memory snapshot report as Markdown: a heading, facts and a table per part of the view."""

from __future__ import annotations

from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.snapshot.view import parts


def _cell(value: str) -> str:
    return value.replace("|", "\\|")


def render_markdown(report: SnapshotReport, top: int = 10) -> str:
    lines: list[str] = []
    for i, part in enumerate(parts(report, top=top)):
        lines.append(("# " if i == 0 else "## ") + part.title)
        lines.append("")
        for key, value in part.facts:
            lines.append(f"- **{key}**: {_cell(value)}")
        if part.facts:
            lines.append("")
        if part.rows:
            lines.append("| " + " | ".join(part.columns) + " |")
            lines.append("|" + "|".join(["---"] + ["---:"] * (len(part.columns) - 1)) + "|")
            lines.extend("| " + " | ".join(_cell(v) for v in row) + " |" for row in part.rows)
            lines.append("")
        for note in part.notes:
            lines.append(note)
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
