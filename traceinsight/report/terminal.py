"""Terminal renderer: each section's renderer lives in ``report/sections/<name>.py``."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from traceinsight.analysis.registry import get
from traceinsight.analysis.report import Report


def make_console(file: Any = None, *, width: int | None = None) -> Console:
    return Console(
        file=file or sys.stdout,
        no_color=bool(os.environ.get("NO_COLOR")),
        width=width,
        soft_wrap=False,
        highlight=False,
    )


def section_renderable(name: str, result: Any) -> RenderableType:
    try:
        module = importlib.import_module(f"traceinsight.report.sections.{name}")
    except ModuleNotFoundError:
        module = None
    if not result.available:
        body: RenderableType = Text(f"not available: {result.reason}", style="yellow")
    elif module is None:
        body = Text("(no terminal view for this section; see --format json)", style="dim")
    else:
        body = module.render_terminal(result)
    return Panel(body, title=f"[bold]{get(name).title}[/bold]", title_align="left", expand=True)


def render(report: Report, console: Console) -> None:
    parts = [section_renderable(name, result) for name, result in report.sections.items()]
    console.print(Group(*parts))
