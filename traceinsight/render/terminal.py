"""Terminal renderer: the headline first, then the findings, then each other section.

A section's own view is registered in ``render/views.py`` by ``render/sections/<name>.py``;
sections without one get the generic facts-and-table view.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.findings.verdict.headline import Headline
from traceinsight.analysis.report import Report
from traceinsight.render import generic
from traceinsight.render.fit import Col, FitTable, Kind
from traceinsight.render.section_views import view_of
from traceinsight.render.shared import ordered, section_title


def make_console(file: Any = None, *, width: int | None = None, stderr: bool = False) -> Console:
    """A console that honours NO_COLOR (any non-empty value) and never soft-wraps tables."""
    return Console(
        file=file or (sys.stderr if stderr else sys.stdout),
        no_color=bool(os.environ.get("NO_COLOR")),
        width=width,
        soft_wrap=False,
        highlight=False,
        # text is the report's, never markup: a fix that says "x[mask]" keeps its brackets
        markup=False,
    )


def text_console(file: Any, width: int | None) -> Console:
    """A console that writes plain text to ``file`` (no colour, no styles), markup off as in
    :func:`make_console`: for text captured or measured rather than shown."""
    return Console(file=file, width=width, no_color=True, color_system=None, soft_wrap=False, highlight=False, markup=False)


_FIGURE = re.compile(r"^[-+]?[\d,.]+(e[-+]?\d+)?( ?[^\s\d]{1,7})?$|^-$")


def _generic_kind(index: int, gv: generic.GenericView) -> Kind:
    """Figures never cut, short strings kept whole, long strings wrapped as prose."""
    values = [row[index] for row in gv.rows]
    if all(_FIGURE.match(v) for v in values):
        return "num"
    return "label" if max(len(v) for v in values) <= 24 else "text"


def generic_renderable(result: Result) -> RenderableType:
    gv = generic.view(result)
    parts: list[RenderableType] = []
    if gv.facts:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for key, value in gv.facts:
            grid.add_row(key, value)
        parts.append(grid)
    if gv.rows:
        parts.append(FitTable([Col(h, _generic_kind(i, gv)) for i, h in enumerate(gv.columns)], gv.rows))
        if gv.total_rows > len(gv.rows):
            parts.append(Text(f"… {gv.total_rows - len(gv.rows)} more rows (see --format json)", style="dim"))
    return Group(*parts) if parts else Text("(nothing to show)", style="dim")


# Below this width panels drop their side borders and padding: four columns matter there.
NARROW = 80


def panel(body: RenderableType, title: str, *, narrow: bool, **kw: Any) -> Panel:
    if narrow:
        return Panel(body, title=title, title_align="left", expand=True, box=box.HORIZONTALS, padding=(0, 0), **kw)
    return Panel(body, title=title, title_align="left", expand=True, **kw)


def section_renderable(name: str, result: Result, *, narrow: bool = False) -> RenderableType:
    if not result.available:
        body: RenderableType = Text(f"not available: {result.reason}", style="yellow")
    else:
        view = view_of(result).terminal
        body = generic_renderable(result) if view is None else view(result)
    return panel(body, f"[bold]{section_title(name)}[/bold]", narrow=narrow)


def headline_renderable(head: Headline, *, narrow: bool = False) -> RenderableType:
    body = Text(head.verdict, style="bold")
    return panel(body, "[bold]Verdict[/bold]", narrow=narrow, border_style="cyan")


def report_renderable(report: Report, *, narrow: bool = False) -> RenderableType:
    """The verdict, then one panel per section."""
    parts = [headline_renderable(report.headline, narrow=narrow)]
    parts.extend(section_renderable(name, result, narrow=narrow) for name, result in ordered(report.sections))
    return Group(*parts)


def render(report: Report, console: Console) -> None:
    console.print(report_renderable(report, narrow=console.width < NARROW))
