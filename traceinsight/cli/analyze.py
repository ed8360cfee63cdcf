"""``traceinsight analyze TRACE...``: every registered analysis as one report; several rank
traces (files, a directory or a glob) are analysed as a job (``cli/compare.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError
from traceinsight.render.outputs.registry import format_help


@app.command("analyze")
def analyze_command(
    traces: Annotated[
        list[str],
        typer.Argument(help="Kineto trace (.json / .json.gz); several files, a directory or a glob: one trace, its profiler cycles, or the ranks of a job", metavar="TRACE..."),
    ],
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("report", also="job"))] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the --output file if it exists")] = False,
    only: Annotated[
        list[str] | None,
        typer.Option("--only", metavar="NAMES", help="Sections to include (comma-separated; a job's: rank_table, stragglers, collective_wait, collective_match, job_findings)"),
    ] = None,
    skip: Annotated[list[str] | None, typer.Option("--skip", metavar="NAMES", help="Sections to leave out (comma-separated)")] = None,
    gap_threshold_us: Annotated[float, typer.Option("--gap-threshold-us", help="Smallest idle gap reported, in µs")] = 10.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
    by_shapes: Annotated[bool, typer.Option("--by-shapes", help="Group the operator table by op name and input shapes")] = False,
    peak_tflops: Annotated[
        float | None, typer.Option("--peak-tflops", help="Peak TFLOP/s of the device, for devices not in the table")
    ] = None,
    peak_bw: Annotated[float | None, typer.Option("--peak-bw", help="Peak memory bandwidth in TB/s")] = None,
    devices: Annotated[
        Path | None, typer.Option("--devices", help="TOML file with a \\[device] table of peaks (see docs/bound.md)")
    ] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Job: worker processes (default: one per core)")] = None,
    engine: Annotated[str, typer.Option("--engine", help="Job: local (process pool), ray, or serial")] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Job: Ray cluster address (default: RAY_ADDRESS, else a local Ray)")
    ] = None,
    full: Annotated[
        bool, typer.Option("--full", help="On a terminal, the whole report rather than its first screen (piped output is always whole)")
    ] = False,
    cycle: Annotated[
        str,
        typer.Option("--cycle", metavar="N|latest|all", help="Directory or glob with several profiler cycles: the one to analyse (1 the oldest, -1 the latest), or all to compare them"),
    ] = "latest",
    capture: Annotated[
        list[Path] | None,
        typer.Option("--capture", metavar="TRACE", help="Trace of the CUDA/HIP graph capture (vLLM, SGLang): its ops and shapes are given to the graph kernels of the run (repeatable; found by itself beside the run in a directory)"),
    ] = None,
) -> None:
    """Analyse a trace: a verdict, then where the GPU time goes, idle gaps, steps and more.

    Sections: overview, device time breakdown, idle gaps and their causes, steps, operators,
    kernels, memory, bound regions and torch.compile. Several rank traces: the job analyses
    (per-rank table, stragglers, collective wait, job findings); exit code 4 when some rank
    could not be read.

    On a terminal it prints the first screen: the verdict, the findings and a line per
    section; --full prints the whole report, --only the sections named. Piped or written
    to a file (-o), the report is always whole.
    """
    from traceinsight.api import resolve_inputs
    from traceinsight.cli.compare import analyze_job_cli, compare_cli
    from traceinsight.render.formats import check, on_terminal, render, show

    inputs = resolve_inputs(traces, cycle)
    for line in inputs.notes:  # which cycle was taken, what was left out
        typer.echo(f"note: {line}", err=True)
    if capture and inputs.kind != "trace":
        raise UsageError("--capture goes with one run's trace, not a job or a series")
    if inputs.kind == "series":
        compare_cli(list(inputs.runs), format=format, output=output, force=force, only=only, skip=skip,
                    jobs=jobs, engine=engine, address=address, cache=not no_cache)
        return
    job = inputs.kind == "job"
    fmt = check("job" if job else "report", format, output=output)
    trace = Path(inputs.paths[0])
    from traceinsight.api import (
        AnalysisConfig,
        loading,
        phases,
        select_sections,
        size,
        wants_progress,
    )
    from traceinsight.api import analyze_trace as analyze
    from traceinsight.api import load_file as load
    from traceinsight.cli.output import check_writable, write_output

    if not job:
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
    if job:
        analyze_job_cli(list(inputs.paths), fmt=fmt, output=output, only=only, skip=skip, jobs=jobs, engine=engine,
                        address=address, config=config, cache=not no_cache)
        return
    with phases(wants_progress(trace)) as phase:
        file_size = trace.stat().st_size if trace.exists() else 0
        phase(f"reading {trace.name} ({size(file_size)})")
        with loading(phase):
            loaded = load(trace, cache=not no_cache)
        captures = [*(str(p) for p in capture or ()), *inputs.captures]
        if captures:
            phase(f"merging {len(captures)} graph capture trace(s)")
            from traceinsight.api import merge_captures

            loaded = merge_captures(loaded, captures, cache=not no_cache)
        report = analyze(loaded, config, only=only, skip=skip, on_section=lambda name: phase(f"analysing: {name}"))
        phase(f"rendering {format}")
        # Rendered inside the progress display: a big HTML page takes a while. The live
        # terminal view is printed after it, once the spinner is gone.
        text = None if fmt == "terminal" and output is None else render(report, fmt)  # the report refers to its trace for the HTML plots
    if text is None:
        # A person at a terminal gets the answer on one screen; a pipe or a file gets it all.
        show(report, glance=not full and only is None and on_terminal())
        return
    write_output(text, output, force=True)
