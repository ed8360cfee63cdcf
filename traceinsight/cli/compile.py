"""``traceinsight compile TRACE``: what torch.compile did in one run."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.app import app
from traceinsight.errors import UsageError

FORMATS = ("terminal", "json")


@app.command("compile")
def compile_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    format: Annotated[str, typer.Option("--format", "-f", help="terminal or json")] = "terminal",
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """torch.compile analysis: compiled regions, compile time, graph breaks, fusion, launches."""
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(FORMATS)}")
    from traceinsight.cli.output import check_writable, write_output

    if output is not None:
        check_writable(output, force=force)
    from traceinsight.analysis import compile as compile_analysis
    from traceinsight.analysis.base import AnalysisConfig
    from traceinsight.trace.loader import load

    result = compile_analysis.run(load(trace, cache=not no_cache), AnalysisConfig())
    if format == "json":
        write_output(json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n", output, force=force)
        return
    from traceinsight.render.terminal import make_console, section_renderable

    if output is None:
        make_console().print(section_renderable("compile", result))
        return
    buffer = io.StringIO()
    make_console(buffer, width=140).print(section_renderable("compile", result))
    write_output(buffer.getvalue(), output, force=force)
