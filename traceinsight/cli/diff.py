"""``traceinsight diff BEFORE AFTER``: did the change help? Noise-aware, with the reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import EXIT_REGRESSION, TraceInsightError, UsageError
from traceinsight.render.outputs.registry import format_help


class RegressionFound(TraceInsightError):
    """The after run is significantly slower than allowed; the CLI exits with code 3."""

    exit_code = EXIT_REGRESSION


@app.command("diff")
def diff_command(
    before: Annotated[Path, typer.Argument(help="Trace of the baseline run (.json / .json.gz)")],
    after: Annotated[Path, typer.Argument(help="Trace of the changed run")],
    format: Annotated[str | None, typer.Option("--format", "-f", help=format_help("diff"))] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write to this file instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output file if it exists")] = False,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            "--fail-on-regression",
            metavar="PCT",
            help="Exit with code 3 when the after run is significantly slower by more than PCT %",
        ),
    ] = None,
    label_before: Annotated[str | None, typer.Option("--label-before", help="Name for the before run")] = None,
    label_after: Annotated[str | None, typer.Option("--label-after", help="Name for the after run")] = None,
    top: Annotated[int, typer.Option("--top", help="Rows per table of ops, kernels and regions")] = 10,
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of the tests")] = 0.05,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap")] = 0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Parse the files even if cached copies exist")] = False,
    drop_outliers: Annotated[
        bool,
        typer.Option(
            "--drop-outliers",
            help="Leave the steps flagged as outliers out of the comparison (kept by default: stalls are part of the run's cost)",
        ),
    ] = False,
) -> None:
    """Compare two runs: step-time verdict with confidence, and the ops, kernels and regions behind it."""
    from traceinsight.render.formats import check

    fmt = check("diff", format, output=output)
    if fail_on_regression is not None and fail_on_regression < 0:
        raise UsageError("--fail-on-regression takes a percentage >= 0")
    if not 0 < alpha < 1:
        raise UsageError("--alpha must be between 0 and 1")
    if top < 1:
        raise UsageError("--top must be >= 1")
    from traceinsight.cli.output import check_writable, emit

    if output is not None:
        check_writable(output, force=force)
    from traceinsight.api import diff

    result = diff(
        before,
        after,
        cache=not no_cache,
        label_before=label_before,
        label_after=label_after,
        top_n=top,
        alpha=alpha,
        seed=seed,
        drop_outliers=drop_outliers,
    )
    emit(result, fmt, output, top=top)
    if fail_on_regression is not None and result.is_regression(fail_on_regression):
        # Raised as a library error (not typer.Exit) so that the exit code survives
        # standalone_mode=False and the message is printed by the one top-level handler.
        raise RegressionFound(
            f"regression: {result.after_label} is slower than {result.before_label} by "
            f"{(result.step_time.ratio or 1.0) * 100 - 100:.1f} % (> {fail_on_regression:g} %)"
        )
