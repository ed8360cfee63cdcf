"""``traceinsight sql TRACE QUERY``: SQL over a trace, with polars (default) or Perfetto.

- ``--engine polars`` runs polars SQL over our frames: tables ``events``, ``kernels``,
  ``counters``, ``memory`` (columns as in the Python API). Works everywhere.
- ``--engine perfetto`` runs Perfetto's trace processor over the trace file (tables ``slice``,
  ``thread``, ``counter``, ...). It needs the ``perfetto`` package and a ``trace_processor``
  binary, given with ``--trace-processor`` or ``TRACEINSIGHT_TRACE_PROCESSOR``: it is not
  downloaded at run time, so that the command behaves the same on offline machines.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from traceinsight.cli.root import app

if TYPE_CHECKING:  # polars is imported when a query runs, so `traceinsight capture` works without it
    import polars as pl
from traceinsight.errors import TraceInsightError, UsageError

ENGINES = ("polars", "perfetto")
OUTPUTS = ("table", "csv", "json")
TRACE_PROCESSOR_ENV = "TRACEINSIGHT_TRACE_PROCESSOR"

NO_TRACE_PROCESSOR = (
    "--engine perfetto needs a trace_processor binary: pass --trace-processor PATH or set "
    f"{TRACE_PROCESSOR_ENV}. Get it on a machine with internet access from "
    "https://get.perfetto.dev/trace_processor and copy it here; or use --engine polars (the default), "
    "which needs nothing extra."
)


def run_polars(trace_path: Path, query: str, *, cache: bool) -> pl.DataFrame:
    import polars as pl

    from traceinsight.api import load_file as load

    trace = load(trace_path, cache=cache)
    try:
        return trace.sql(query)
    except pl.exceptions.PolarsError as exc:
        # The query is input like the trace: a bad one is a data error (exit 1), not CLI misuse.
        message = str(exc).strip().splitlines()[0]
        if "relation" in message or "table" in message.lower():  # "relation 'kernel' was not found": name the ones there are
            from traceinsight.api import FRAME_SCHEMAS

            message += f" (tables: {', '.join(FRAME_SCHEMAS)})"
        raise TraceInsightError(f"{trace_path}: SQL error: {message}") from exc


def run_perfetto(trace_path: Path, query: str, *, binary: str | None) -> pl.DataFrame:
    binary = binary or os.environ.get(TRACE_PROCESSOR_ENV)
    if not binary:
        raise UsageError(NO_TRACE_PROCESSOR)
    if not Path(binary).is_file():
        raise UsageError(f"trace_processor binary {binary} does not exist")
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as exc:
        raise UsageError("--engine perfetto needs the 'perfetto' package: pip install perfetto") from exc
    if not trace_path.is_file():
        raise UsageError(f"{trace_path}: no such file")
    tp = TraceProcessor(trace=str(trace_path), config=TraceProcessorConfig(bin_path=binary))
    try:
        frame = tp.query(query).as_pandas_dataframe()
    except Exception as exc:  # the trace processor reports SQL errors as its own exception type
        raise TraceInsightError(f"trace_processor: {exc}") from exc
    finally:
        tp.close()
    import polars as pl

    rows: pl.DataFrame = pl.from_pandas(frame)
    return rows


@app.command("sql")
def sql_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    query: Annotated[str, typer.Argument(help="SQL query, e.g. \"SELECT name, sum(dur_ns) FROM kernels GROUP BY 1\"")],
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="polars: polars SQL over the tables events, kernels, counters, memory (default). "
            "perfetto: Perfetto's trace_processor over the file (tables slice, thread, counter, ...)",
        ),
    ] = "polars",
    trace_processor: Annotated[
        str | None,
        typer.Option("--trace-processor", help=f"Path of a trace_processor binary (or set {TRACE_PROCESSOR_ENV})"),
    ] = None,
    output_format: Annotated[str | None, typer.Option("--format", "-f", help="table, csv or json; default: from -o's suffix, else table")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the result to this file")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the --output file if it exists")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """Run a SQL query over a trace and print the rows."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    from traceinsight.render.formats import check, render

    fmt = check("sql", output_format, names={"table": "terminal", "csv": "csv", "json": "json"}, output=output)
    from traceinsight.cli.output import check_writable, write_output

    if output is not None:
        check_writable(output, force=force)
    if engine == "perfetto":
        frame = run_perfetto(trace, query, binary=trace_processor)
    else:
        frame = run_polars(trace, query, cache=not no_cache)
    from traceinsight.api import QueryRows

    rows = QueryRows(str(trace), query, engine, frame)
    # Rendered as text even on a terminal, like csv and json, so that it pipes the same.
    write_output(render(rows, fmt), output, force=True)
