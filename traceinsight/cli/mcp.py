"""``traceinsight mcp``: the analyses as tools for coding assistants (Model Context Protocol)."""

from __future__ import annotations

from typing import Annotated

import typer

from traceinsight.cli.root import _state, app
from traceinsight.errors import UsageError


@app.command("mcp")
def mcp_command(
    root: Annotated[
        list[str] | None,
        typer.Option("--root", help="Folder whose files the tools may open (repeatable; default: the working directory)"),
    ] = None,
    http: Annotated[
        str | None,
        typer.Option("--http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (:PORT binds 127.0.0.1)"),
    ] = None,
    max_memory_mb: Annotated[
        int, typer.Option("--max-memory-mb", help="Loaded traces kept in memory up to this size; the least recently used are released past it")
    ] = 4096,
    max_chars: Annotated[
        int, typer.Option("--max-chars", help="Size cap of one answer, in characters; longer answers come in parts")
    ] = 40_000,
    cache: Annotated[
        bool, typer.Option("--cache", help="Read and write the Parquet cache of loaded traces (off: the server writes nothing; SQL over a job needs it)")
    ] = False,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Worker processes for a job's ranks (default: one per core)")] = None,
) -> None:
    """Serve the analyses as tools for a coding assistant (Model Context Protocol), on stdio.

    Tools open a trace, a job or an allocator snapshot and answer from what is loaded: the
    verdict and findings, any section, SQL, the kernels of a step or op, diff, compare,
    what-if and memory answers. Only files under the roots can be opened, nothing is
    written, and SQL reads nothing but the trace. See docs/agents.md.
    """
    if max_memory_mb < 1:
        raise UsageError("--max-memory-mb must be >= 1")
    if max_chars < 2000:
        raise UsageError("--max-chars must be >= 2000")
    from traceinsight.mcp.roots import Roots
    from traceinsight.mcp.server import build, parse_address, serve

    address = parse_address(http) if http is not None else None
    server, _ = build(
        Roots.of(root), max_bytes=max_memory_mb << 20, max_chars=max_chars, cache=cache, jobs=jobs, verbose=_state["verbose"]
    )
    serve(server, http=address)
