"""``traceinsight gaps TRACE``: every idle gap of the GPU(s), with its step, cause and culprit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError


@app.command("gaps")
def gaps_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    threshold_us: Annotated[float, typer.Option("--threshold-us", help="Smallest idle gap listed, in µs")] = 10.0,
    format: Annotated[str, typer.Option("--format", "-f", help="terminal or json")] = "terminal",
    limit: Annotated[int | None, typer.Option("--limit", help="List at most this many gaps (largest first)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """List the idle gaps of each GPU in time order, with the summary by cause and culprit."""
    from traceinsight.render.formats import check

    fmt = check("gaps", format)
    if threshold_us < 0:
        raise UsageError("--threshold-us must be zero or more")
    if limit is not None and limit < 0:
        raise UsageError("--limit must be zero or more")
    from traceinsight.api import AnalysisConfig, GapsListing, run_gaps
    from traceinsight.api import load_file as load
    from traceinsight.cli.output import emit

    config = AnalysisConfig(gap_threshold_ns=round(threshold_us * 1000))
    loaded = load(trace, cache=not no_cache)
    result = run_gaps(loaded, config)
    listed = result.gaps
    if limit is not None:
        listed = listed.sort(["dur_ns", "start_ns"], descending=[True, False]).head(limit).sort(["device", "start_ns"])
    emit(GapsListing(loaded.meta.path, result, listed, limit), fmt, None)
