"""``traceinsight analyze TRACE``: every registered analysis as one report."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.app import app
from traceinsight.errors import UsageError

FORMATS = ("terminal", "json", "md", "html")
# Width of terminal-format reports written to a file (no terminal to measure).
FILE_WIDTH = 100


def render_report(report: object, fmt: str, *, trace: object = None, width: int | None = None, color: bool = False) -> str:
    """The report as text in one of ``FORMATS``; ``trace`` adds the HTML timeline and counter plots."""
    from traceinsight.analysis.report import Report

    assert isinstance(report, Report)
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, allow_nan=False) + "\n"
    if fmt == "md":
        from traceinsight.render.markdown import render_markdown

        return render_markdown(report)
    if fmt == "html":
        from traceinsight.render.html import render_html

        return render_html(report, trace)  # type: ignore[arg-type]
    from rich.console import Console

    from traceinsight.render.terminal import render

    buf = io.StringIO()
    console = Console(file=buf, width=width or FILE_WIDTH, no_color=not color, color_system=None, soft_wrap=False, highlight=False)
    render(report, console)
    return buf.getvalue()


@app.command("analyze")
def analyze_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="terminal, json, md (Markdown) or html (self-contained page with plots)")
    ] = "terminal",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the --output file if it exists")] = False,
    only: Annotated[list[str] | None, typer.Option("--only", help="Sections to include (comma-separated)")] = None,
    skip: Annotated[list[str] | None, typer.Option("--skip", help="Sections to leave out (comma-separated)")] = None,
    gap_threshold_us: Annotated[float, typer.Option("--gap-threshold-us", help="Smallest idle gap reported, in µs")] = 10.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
    by_shapes: Annotated[bool, typer.Option("--by-shapes", help="Group the operator table by op name and input shapes")] = False,
    peak_tflops: Annotated[
        float | None, typer.Option("--peak-tflops", help="Peak TFLOP/s of the device, for devices not in the table")
    ] = None,
    peak_bw: Annotated[float | None, typer.Option("--peak-bw", help="Peak memory bandwidth in TB/s")] = None,
    devices: Annotated[
        Path | None, typer.Option("--devices", help="TOML file with a [device] table of peaks (see docs/bound.md)")
    ] = None,
) -> None:
    """Analyse a trace: a verdict, then where the GPU time goes, idle gaps, steps and more.

    Sections: overview, device time breakdown, idle gaps and their causes, steps, operators,
    kernels, memory, bound regions and torch.compile.
    """
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    from traceinsight.analysis.base import AnalysisConfig
    from traceinsight.analysis.report import analyze, select_sections
    from traceinsight.cli.output import check_writable, write_output
    from traceinsight.render.format import size
    from traceinsight.render.progress import phases, wants_progress
    from traceinsight.trace.loader import load

    select_sections(only, skip)  # reject unknown names before the (slow) load
    if output is not None:
        check_writable(output, force=force)
    if gap_threshold_us < 0:
        raise UsageError("--gap-threshold-us must be >= 0")
    if devices is not None and (peak_tflops is not None or peak_bw is not None):
        raise UsageError("give either --devices FILE.toml or --peak-tflops/--peak-bw, not both")
    config = AnalysisConfig(
        gap_threshold_ns=round(gap_threshold_us * 1000),
        by_shapes=by_shapes,
        peak_tflops=peak_tflops,
        peak_bw_tbps=peak_bw,
        devices_toml=str(devices) if devices is not None else None,
    )
    with phases(wants_progress(trace)) as phase:
        file_size = trace.stat().st_size if trace.exists() else 0
        phase(f"reading {trace.name} ({size(file_size)})")
        loaded = load(trace, cache=not no_cache)
        report = analyze(loaded, config, only=only, skip=skip, on_section=lambda name: phase(f"analysing: {name}"))
        phase(f"rendering {format}")
        if format == "terminal" and output is None:
            from traceinsight.render.terminal import make_console, render

            text = None
        else:
            text = render_report(report, format, trace=loaded)
    if text is None:
        render(report, make_console())
        return
    write_output(text, output, force=True)
