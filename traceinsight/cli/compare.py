"""``traceinsight compare RUN...`` (a series of runs), and the job path of ``analyze`` (several
rank traces, a directory or a glob)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import EXIT_PARTIAL, UsageError
from traceinsight.render.outputs.registry import format_help


def _engine_options(engine: str, jobs: int | None) -> None:
    from traceinsight.api import ENGINES

    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if jobs is not None and jobs < 1:
        raise UsageError("--jobs must be >= 1")


def _warn_partial(lines: list[str]) -> None:
    for line in lines:
        typer.echo(f"warning: not analysed: {line}", err=True)


def analyze_job_cli(
    traces: list[str],
    *,
    fmt: str,
    output: Path | None,
    only: list[str] | None,
    skip: list[str] | None,
    jobs: int | None,
    engine: str,
    address: str | None,
    config: object,
    cache: bool,
) -> None:
    """``analyze`` over the ranks of a job; exits 4 when some rank could not be analysed."""
    from traceinsight.api import AnalysisConfig, load_job, select_job_sections
    from traceinsight.cli.output import emit
    from traceinsight.render.formats import check

    fmt_checked = check("job", fmt, output=output)
    _engine_options(engine, jobs)
    select_job_sections(only, skip)  # reject unknown names before the (slow) load
    assert isinstance(config, AnalysisConfig)
    source: str | list[str] = traces[0] if len(traces) == 1 else traces
    # Raises when no rank could be loaded (JobLoadError names each rank's reason).
    job = load_job(source, jobs=jobs, engine=engine, address=address, config=config, cache=cache)
    report = job.analyze(only=only, skip=skip)
    emit(report, fmt_checked, output)
    if job.failed:
        _warn_partial([f"rank {f.rank}: " + (f.error if f.path in f.error else f"{f.path}: {f.error}") for f in job.failed])
        raise typer.Exit(EXIT_PARTIAL)


@app.command("compare")
def compare_command(
    runs: Annotated[
        list[str],
        typer.Argument(help="Two or more runs: trace files, or jobs (a directory or a quoted glob of rank traces)", metavar="RUN..."),
    ],
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("series"))] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", metavar="NAMES", help="Sections to include (comma-separated): runs, breakdown, findings")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", metavar="NAMES", help="Sections to leave out (comma-separated); without findings, none are computed")
    ] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Worker processes (default: one per core)")] = None,
    engine: Annotated[str, typer.Option("--engine", help="local (process pool), ray, or serial")] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the files even if cached copies exist")] = False,
) -> None:
    """Compare a series of runs: one row per run, each against the first with diff's statistics.

    Sections: runs (step times, change against run 0, plot), breakdown (compute,
    communication, idle per step), findings (each run's top findings).
    """
    compare_cli(list(runs), format=format, output=output, force=force, only=only, skip=skip, jobs=jobs,
                engine=engine, address=address, cache=not no_cache)


def compare_cli(
    runs: list[str | tuple[str, ...]],
    *,
    format: str | None,
    output: Path | None,
    force: bool,
    only: list[str] | None,
    skip: list[str] | None,
    jobs: int | None,
    engine: str,
    address: str | None,
    cache: bool,
) -> None:
    """A series of runs (each a file, a directory or glob, or a job's files) to the output;
    exits 4 when some run could not be analysed."""
    from traceinsight.api import select_series_sections
    from traceinsight.cli.output import check_writable, emit
    from traceinsight.render.formats import check

    fmt = check("series", format, output=output)
    select_series_sections(only, skip)  # reject unknown names before the (slow) load
    if len(runs) < 2:
        raise UsageError("compare needs two or more runs")
    _engine_options(engine, jobs)
    if output is not None:
        check_writable(output, force=force)
    from traceinsight.api import compare

    result = compare(
        [list(r) if isinstance(r, tuple) else r for r in runs], jobs=jobs, engine=engine,
        address=address or os.environ.get("RAY_ADDRESS"), cache=cache, only=only, skip=skip,
    )  # fmt: skip
    if result.runs.height == 0:
        from traceinsight.errors import TraceInsightError

        raise TraceInsightError(f"no run could be analysed: {result.failed[0] if result.failed else 'no input'}")
    emit(result, fmt, output)
    if result.failed:
        _warn_partial(list(result.failed))
        raise typer.Exit(EXIT_PARTIAL)
