"""The typer application every command registers on, and its root options; ``cli/app.py``
imports each command's module and runs the application."""

from __future__ import annotations

import os
import sys
from typing import Annotated

# polars' bundled allocator (jemalloc) keeps freed pages for a while before returning them,
# first as "dirty" pages and then as "muzzy" ones, which are MADV_FREE'd and still count as
# resident until the kernel needs them. Loading a big trace frees and reallocates hundreds of
# MB in steps, so a short dirty decay and no muzzy stage lower the peak resident memory. On
# the 453 MB benchmark trace (five interleaved runs each), peak RSS was 545–608 MB with
# 10/0 ms against 835–850 MB with the earlier 200/200 ms, at the same speed; 0/0 gives
# ~470 MB but faults pages in again and again (+40 % page faults, about +0.25 s). It is read
# once, when polars loads, so it is set here, before any command imports polars; a value the
# user set wins. Library and notebook users set it themselves (see docs/trace-model.md).
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")

import typer

from traceinsight.version import __version__

app = typer.Typer(
    name="traceinsight",
    help="Turn PyTorch profiler traces into answers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Set by the root callback; read by main() to decide whether a traceback is shown.
_state = {"verbose": False}


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"traceinsight {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Show full tracebacks on errors.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    _state["verbose"] = verbose
