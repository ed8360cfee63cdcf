"""``traceinsight analyze TRACE``: every registered analysis as one report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.app import app
from traceinsight.errors import UsageError

FORMATS = ("terminal", "json")


@app.command("analyze")
def analyze_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    format: Annotated[str, typer.Option("--format", "-f", help="terminal or json")] = "terminal",
    only: Annotated[list[str] | None, typer.Option("--only", help="Sections to include (comma-separated)")] = None,
    skip: Annotated[list[str] | None, typer.Option("--skip", help="Sections to leave out (comma-separated)")] = None,
    gap_threshold_us: Annotated[float, typer.Option("--gap-threshold-us", help="Smallest idle gap reported, in µs")] = 10.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """Analyse a trace: where the GPU time goes, idle gaps and their causes, steps, and more."""
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    from traceinsight.analysis.base import AnalysisConfig
    from traceinsight.analysis.report import analyze
    from traceinsight.trace.loader import load

    config = AnalysisConfig(gap_threshold_ns=int(round(gap_threshold_us * 1000)))
    loaded = load(trace, cache=not no_cache)
    report = analyze(loaded, config, only=only, skip=skip)
    if format == "json":
        json.dump(report.to_dict(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
        return
    from traceinsight.report.terminal import make_console, render

    render(report, make_console())
