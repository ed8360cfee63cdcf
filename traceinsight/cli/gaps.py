"""``traceinsight gaps TRACE``: every idle gap of the GPU(s), with its step, cause and culprit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.app import app
from traceinsight.errors import UsageError

FORMATS = ("terminal", "json")


@app.command("gaps")
def gaps_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    threshold_us: Annotated[float, typer.Option("--threshold-us", help="Smallest idle gap listed, in µs")] = 10.0,
    format: Annotated[str, typer.Option("--format", "-f", help="terminal or json")] = "terminal",
    limit: Annotated[int | None, typer.Option("--limit", help="List at most this many gaps (largest first)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """List the idle gaps of each GPU in time order, with the summary by cause and culprit."""
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    if threshold_us < 0:
        raise UsageError("--threshold-us must be zero or more")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be zero or more")
    from traceinsight.analysis import gaps
    from traceinsight.analysis.base import AnalysisConfig, jsonable
    from traceinsight.trace.loader import load

    config = AnalysisConfig(gap_threshold_ns=round(threshold_us * 1000))
    result = gaps.run(load(trace, cache=not no_cache), config)
    listed = result.gaps
    if limit is not None:
        listed = listed.sort(["dur_ns", "start_ns"], descending=[True, False]).head(limit).sort(["device", "start_ns"])
    if format == "json":
        data = result.to_dict()
        data["gaps"] = jsonable(listed)
        json.dump(data, sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return
    from rich.console import Group
    from rich.text import Text

    from traceinsight.render.sections.gaps import gaps_table, render_terminal
    from traceinsight.render.terminal import make_console

    console = make_console()
    if not result.available:
        console.print(Text(f"not available: {result.reason}", style="yellow"))
        return
    title = f"{listed.height:,} of {result.gap_count:,} gaps (start from window start)"
    console.print(Group(render_terminal(result, include_top=False), gaps_table(listed, title=title, origin_ns=result.window_start_ns)))
