"""``traceinsight memory SNAPSHOT``: what a CUDA allocator snapshot says about peak, leaks,
fragmentation and an out-of-memory error (and, with ``--compare``, against a second one)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError
from traceinsight.render.outputs.registry import format_help


@app.command("memory")
def memory_command(
    snapshot: Annotated[
        Path,
        typer.Argument(
            help="Allocator snapshot: the pickle torch.cuda.memory._dump_snapshot writes"
        ),
    ],
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="A second snapshot: the change of peak memory and per site"),
    ] = None,
    device: Annotated[
        int | None,
        typer.Option(
            "--device", help="The CUDA device to explain (default: the one with the most events)"
        ),
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(
            "--iterations",
            help="Iterations the trace holds, when they cannot be found from it (cuts it into equal slices of time)",
        ),
    ] = None,
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("memory_snapshot"))] = None,
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the output file if it exists")
    ] = False,
) -> None:
    """Explain an allocator snapshot: the peak and what held it, leaks, fragmentation, the OOM.

    The pickle is read without running anything in it: a file that asks for any class or
    function is refused."""
    from traceinsight.cli.output import check_writable, emit
    from traceinsight.render.formats import check

    fmt = check("memory_snapshot", format, output=output)
    if iterations is not None and iterations < 3:
        raise UsageError(
            "--iterations must be 3 or more (growth needs at least three iterations to be seen)"
        )
    if device is not None and device < 0:
        raise UsageError("--device must be zero or more")
    if output is not None:
        check_writable(output, force=force)
    from traceinsight.api import analyze_snapshot
    from traceinsight.api import load_snapshot_file as load_memory_snapshot

    loaded = load_memory_snapshot(snapshot)
    other = load_memory_snapshot(compare) if compare is not None else None
    emit(
        analyze_snapshot(loaded, device=device, iterations=iterations, compare_with=other),
        fmt,
        output,
    )
