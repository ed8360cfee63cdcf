"""``traceinsight capture [OPTIONS] -- python train.py ARGS``: profile an unmodified script.

torch is imported only when the command runs, so ``traceinsight --help`` stays fast and works
where only the analysis side is installed.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from traceinsight.cli.root import app
from traceinsight.errors import UsageError


@app.command(
    "capture",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def capture_command(
    ctx: typer.Context,
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Trace file to write (.json.gz or .json).")
    ] = Path("trace.json.gz"),
    wait: Annotated[
        int,
        typer.Option(
            "--wait",
            help="Steps run without the profiler before warming up; timed (wall clock, CUDA events) "
            "to give the step without the profiler (the first holds start-up and is left out).",
        ),
    ] = 3,
    warmup: Annotated[int, typer.Option("--warmup", help="Steps traced but discarded.")] = 1,
    active: Annotated[int, typer.Option("--active", help="Steps recorded.")] = 3,
    interval: Annotated[
        float, typer.Option("--interval", help="NVML sampling interval in seconds.")
    ] = 0.1,
    with_stack: Annotated[
        bool, typer.Option("--with-stack", help="Record Python stacks (bigger traces).")
    ] = False,
    profile_memory: Annotated[
        bool, typer.Option("--profile-memory", help="Record allocations and frees.")
    ] = False,
    memory: Annotated[
        bool,
        typer.Option(
            "--memory",
            help="Also record the CUDA allocator's history and write a snapshot beside the trace "
            "(NAME.memory.pickle, read by `traceinsight memory`), also when the script fails.",
        ),
    ] = False,
    steps_from: Annotated[
        str,
        typer.Option(
            "--steps-from",
            help="'optimizer': each optimizer.step() is a step; 'manual': the script marks steps "
            "itself with current_profiler().step() (from traceinsight.capture).",
        ),
    ] = "optimizer",
    no_nvml: Annotated[bool, typer.Option("--no-nvml", help="Do not sample GPU counters.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the output trace if it exists.")] = False,
    summary_json: Annotated[
        Path | None, typer.Option("--summary-json", help="Also write the GPU summary as JSON.")
    ] = None,
) -> None:
    """Run a Python script under the profiler, sampling GPU counters, and write its trace.

    Example: traceinsight capture -o run.json.gz --active 5 -- python train.py --epochs 1
    """
    command = list(ctx.args)
    if not command:
        raise UsageError("give the script to run after --, e.g. `-- python train.py ARGS`")
    if steps_from not in ("optimizer", "manual"):
        raise UsageError(f"--steps-from must be 'optimizer' or 'manual', not {steps_from!r}")
    if interval <= 0:
        raise UsageError("--interval must be > 0")
    if active < 1 or wait < 0 or warmup < 0:
        raise UsageError("--active must be >= 1 and --wait/--warmup >= 0")

    from traceinsight.cli.output import check_writable

    check_writable(output, force=force)  # before the script runs, not after its work is done
    from traceinsight.api import run_script, write_bytes_atomic

    # The command says once, at the end, why there are no GPU counters: the library's own
    # warning (with its source line) and torch's CUDA probing noise would only repeat it.
    warnings.filterwarnings("ignore", message=r"traceinsight: .* unavailable", category=RuntimeWarning)
    warnings.filterwarnings("ignore", message=r"CUDA initialization", category=UserWarning)

    result = run_script(
        command,
        output=output,
        wait=wait,
        warmup=warmup,
        active=active,
        interval_s=interval,
        with_stack=with_stack,
        profile_memory=profile_memory,
        steps_from="manual" if steps_from == "manual" else "optimizer",
        nvml=not no_nvml,
        memory_snapshot=memory,
    )
    err = sys.stderr
    if result.paths:
        print(f"traceinsight: trace written to {result.message}", file=err)
    else:
        print(f"traceinsight: {result.message}", file=err)
    if result.memory_snapshot is not None:
        print(f"traceinsight: memory snapshot written to {result.memory_snapshot}", file=err)
    elif memory:
        print("traceinsight: no memory snapshot (CUDA is not available)", file=err)
    if result.summary is not None:
        print(result.summary.format(), file=err)
        if summary_json is not None:
            write_bytes_atomic((result.summary.to_json() + "\n").encode(), summary_json, gz=False)
    elif result.nvml_status != "ok":
        print(f"traceinsight: no GPU counters ({result.nvml_status})", file=err)
    if result.exit_code != 0:
        # SystemExit, not typer.Exit: it reaches the process exit status whichever way the
        # app is invoked (standalone or through main()).
        raise SystemExit(result.exit_code)
