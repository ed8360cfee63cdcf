"""``traceinsight bound TRACE``: overhead-, memory- or compute-bound, per region, op or kernel."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError

if TYPE_CHECKING:
    from traceinsight.api import BoundGrouping

GROUPINGS: tuple[BoundGrouping, ...] = ("region", "op", "kernel")


@app.command("bound")
def bound_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    by: Annotated[str, typer.Option("--by", help="region, op or kernel")] = "region",
    peak_tflops: Annotated[
        float | None, typer.Option("--peak-tflops", help="Peak TFLOP/s of the device (used for every dtype)")
    ] = None,
    peak_bw: Annotated[float | None, typer.Option("--peak-bw", help="Peak memory bandwidth in TB/s")] = None,
    devices: Annotated[
        Path | None, typer.Option("--devices", help="TOML file with a \\[device] table of peaks")
    ] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="terminal or json")] = "terminal",
    top: Annotated[int, typer.Option("--top", help="Rows shown in the terminal")] = 20,
    gap_threshold_us: Annotated[float, typer.Option("--gap-threshold-us", help="Smallest idle gap reported, in µs")] = 10.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """Label regions, ops or kernels as overhead/host/sync/data/memory/compute-bound, with evidence."""
    from traceinsight.render.formats import check

    fmt = check("bound", format)
    grouping = next((g for g in GROUPINGS if g == by), None)
    if grouping is None:
        raise UsageError(f"unknown grouping {by!r}; choose from {', '.join(GROUPINGS)}")
    if devices is not None and (peak_tflops is not None or peak_bw is not None):
        raise UsageError("give either --devices FILE.toml or --peak-tflops/--peak-bw, not both")
    from traceinsight.api import AnalysisConfig, BoundResult, load_toml, run_one
    from traceinsight.api import load_file as load

    if devices is not None:
        load_toml(devices)  # fail on a bad file before the trace is parsed
    config = AnalysisConfig(
        gap_threshold_ns=round(gap_threshold_us * 1000),
        top_n=top,
        peak_tflops=peak_tflops,
        peak_bw_tbps=peak_bw,
        devices_toml=str(devices) if devices is not None else None,
    )
    loaded = load(trace, cache=not no_cache)
    result = run_one(loaded, "bound", config)  # with the gaps it reads computed first
    assert isinstance(result, BoundResult)
    from traceinsight.api import BoundListing
    from traceinsight.cli.output import emit

    emit(BoundListing(loaded.meta.path, result, grouping, top), fmt, None)
