"""``traceinsight export TRACE -o FILE.pftrace``: the timeline plus findings for ui.perfetto.dev."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError


@app.command("export")
def export_command(
    trace: Annotated[Path, typer.Argument(help="Kineto trace: .json or .json.gz")],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Perfetto trace to write (default: TRACE's name with .pftrace, next to it)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    no_analysis: Annotated[
        bool, typer.Option("--no-analysis", help="Only convert the timeline and counters; add no analysis tracks")
    ] = False,
    gap_threshold_us: Annotated[float, typer.Option("--gap-threshold-us", help="Smallest idle gap shown, in µs")] = 10.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the file even if a cached copy exists")] = False,
) -> None:
    """Write a Perfetto trace: the timeline plus idle gaps, steps, bound labels and counters.

    Idle gaps with their causes, device-side steps, bound labels per region and NVML/GPM
    counters become extra tracks. Open it in ui.perfetto.dev (the file stays on your machine).
    """
    try:
        import perfetto
    except ImportError as exc:
        raise UsageError("the Perfetto export needs the 'perfetto' package: pip install perfetto") from exc
    from traceinsight.api import AnalysisConfig
    from traceinsight.api import analyze_trace as analyze
    from traceinsight.api import load_file as load
    from traceinsight.cli.output import check_writable, write_output
    from traceinsight.render.formats import perfetto

    output = output or default_output(trace)
    check_writable(output, force=force)
    loaded = load(trace, cache=not no_cache)
    report = None
    if not no_analysis:
        config = AnalysisConfig(gap_threshold_ns=round(gap_threshold_us * 1000))
        report = analyze(loaded, config, only=[s for s in ("overview", "gaps", "steps", "bound") if _registered(s)])
    write_output(perfetto(loaded, report), output, force=True)


def _registered(name: str) -> bool:
    from traceinsight.api import ANALYSES

    return any(spec.name == name for spec in ANALYSES)


def default_output(trace: Path) -> Path:
    """``run.json.gz`` → ``run.pftrace`` in the same folder."""
    name = trace.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return trace.with_name(name + ".pftrace")
