"""``traceinsight whatif TRACE``: predicted step time after a change, and the critical path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError
from traceinsight.render.outputs.registry import format_help


@app.command("whatif")
def whatif_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    scale: Annotated[list[str] | None, typer.Option("--scale", help="Scale device work: FAMILY=FACTOR or 'name~REGEX=FACTOR'; FACTOR is a time multiplier (0.5) or a speed-up (2x, '2x faster', '2x slower'). Repeatable")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", help="Remove host spans or device work whose name matches REGEX (e.g. cudaStreamSynchronize). Repeatable")] = None,
    host: Annotated[list[str] | None, typer.Option("--host", help="Scale host time: FACTOR (all) or REGION=FACTOR (inside spans matching REGION). Repeatable")] = None,
    graphs: Annotated[bool, typer.Option("--graphs", help="Collapse launches as CUDA graphs do: launch calls cost ~0")] = False,
    overlap_comm: Annotated[bool, typer.Option("--overlap-comm", help="Communication kernels fully overlapped (no time on their stream)")] = False,
    async_copies: Annotated[bool, typer.Option("--async-copies", help="Blocking copies no longer make the host wait")] = False,
    finding: Annotated[list[str] | None, typer.Option("--finding", help="Apply the change a finding of this trace is priced by (its id, e.g. eager_attention), on the step the findings are priced on: several together give the saving of a fix that covers them all. Repeatable")] = None,
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("whatif"))] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """Replay the trace with a change and predict the step time before and after it."""
    from traceinsight.cli.output import check_writable, emit
    from traceinsight.render.formats import check

    fmt = check("whatif", format, output=output)
    from traceinsight.api import TransformError
    from traceinsight.api import parse_changes as parse

    try:
        changes = parse(scale or [], remove or [], host or [], graphs=graphs, overlap_comm=overlap_comm, async_copies=async_copies)
    except TransformError as exc:
        raise UsageError(str(exc)) from None
    if not changes and not finding:
        raise UsageError("name a change: --finding, --scale, --remove, --host, --graphs, --overlap-comm or --async-copies")
    if output is not None:
        check_writable(output, force=force)
    from traceinsight.api import load_file as load
    from traceinsight.api import whatif

    loaded = load(trace, cache=not no_cache)
    result = whatif(loaded, *changes, findings=finding or ())  # a change that cannot apply: UsageError
    from traceinsight.api import WhatIfReport

    emit(WhatIfReport(loaded.meta.path, result), fmt, output)
