"""The memory snapshot report on the terminal: one panel per part of the view."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.snapshot.view import Part, parts


def _panel(part: Part) -> Panel:
    body: list[RenderableType] = []
    if part.facts:
        width = max(len(k) for k, _ in part.facts)
        body.append(Text("\n".join(f"{k:<{width}}  {v}" for k, v in part.facts)))
    if part.rows:
        cols = [Col(part.columns[0], "label", max_width=80), *(Col(c) for c in part.columns[1:])]
        body.append(FitTable(cols, part.rows))
    body.extend(
        Text(n, style="yellow" if n.startswith("not available") else "") for n in part.notes
    )
    return Panel(Group(*body), title=f"[bold]{part.title}[/bold]", title_align="left", expand=True)


def render_terminal(report: SnapshotReport) -> RenderableType:
    return Group(*(_panel(p) for p in parts(report)))
