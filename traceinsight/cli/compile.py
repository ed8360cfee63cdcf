"""``traceinsight compile TRACE``: what torch.compile did in one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.render.outputs.registry import format_help


@app.command("compile")
def compile_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("compile"))] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """torch.compile analysis: compiled regions, compile time, graph breaks, fusion, launches."""
    from traceinsight.cli.output import check_writable, emit
    from traceinsight.render.formats import check

    fmt = check("compile", format, output=output)

    if output is not None:
        check_writable(output, force=force)
    from traceinsight.api import AnalysisConfig, CompileReport, run_compile
    from traceinsight.api import load_file as load

    loaded = load(trace, cache=not no_cache)
    result = run_compile(loaded, AnalysisConfig())
    emit(CompileReport(loaded.meta.path, result), fmt, output)
