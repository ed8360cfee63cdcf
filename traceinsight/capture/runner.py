"""Run an unmodified Python script under ``profile`` (what ``traceinsight capture`` does)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from traceinsight.capture.profiler import Profile, Schedule
from traceinsight.errors import CaptureError

if TYPE_CHECKING:
    from traceinsight.capture.monitor import GpuSummary

StepsFrom = Literal["optimizer", "manual"]

_PYTHON_NAMES = ("python", "python3", "pypy", "pypy3")


@dataclass
class RunResult:
    """What a captured run produced: the script's exit code, the traces written and a summary."""

    exit_code: int
    paths: list[Path] = field(default_factory=list)
    steps: int = 0
    summary: GpuSummary | None = None
    nvml_status: str = "disabled"
    message: str = ""
    # the allocator snapshot, when one was asked for and written
    memory_snapshot: Path | None = None


def split_command(command: Sequence[str]) -> tuple[str, str, list[str]]:
    """``[python] script.py args`` or ``[python] -m module args`` → (kind, target, argv)."""
    args = list(command)
    if args and args[0] == "--":
        args = args[1:]
    if args and (
        os.path.basename(args[0]).rstrip("0123456789.") in _PYTHON_NAMES
        or os.path.abspath(args[0]) == os.path.abspath(sys.executable)
    ):
        args = args[1:]
    if not args:
        raise CaptureError("no script given: use `traceinsight capture -- python train.py ARGS`")
    if args[0] == "-m":
        if len(args) < 2:
            raise CaptureError("`-m` needs a module name")
        return "module", args[1], args[2:]
    if args[0].startswith("-"):
        raise CaptureError(f"unsupported python option {args[0]!r}; give a script or -m module")
    script = args[0]
    if not Path(script).is_file():
        raise CaptureError(f"script not found: {script}")
    return "script", script, args[1:]


def exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    # sys.exit("message") prints the message and exits with 1, as Python itself does.
    print(code, file=sys.stderr)
    return 1


def _run_target(kind: str, target: str, argv: list[str]) -> int:
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if kind == "module":
            sys.argv = [target, *argv]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            script = str(Path(target))
            sys.argv = [script, *argv]
            # Like `python script.py`: the script's directory comes first on sys.path.
            sys.path.insert(0, str(Path(script).resolve().parent))
            runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exc:
        return exit_code_of(exc)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def run_script(
    command: Sequence[str],
    *,
    output: str | os.PathLike[str] = "trace.json.gz",
    # steps without the profiler, timed: the first holds start-up, the later ones give the step
    wait: int = 3,
    warmup: int = 1,
    active: int = 3,
    interval_s: float = 0.1,
    with_stack: bool = False,
    profile_memory: bool = False,
    record_shapes: bool = True,
    steps_from: StepsFrom = "optimizer",
    nvml: bool = True,
    memory_snapshot: bool = False,
) -> RunResult:
    """Run ``[python] script.py ARGS`` in this process under :func:`profile`.

    With ``steps_from="optimizer"`` every ``optimizer.step()`` (any torch optimizer, through
    torch's global step hook) advances the profiler schedule; with ``"manual"`` the script
    calls ``traceinsight.capture.current_profiler().step()`` itself. An exception in the
    script is printed and gives exit code 1; the trace is written either way (and, with
    ``memory_snapshot``, the allocator snapshot beside it).
    """
    kind, target, argv = split_command(command)
    if steps_from not in ("optimizer", "manual"):
        raise CaptureError(f"--steps-from must be 'optimizer' or 'manual', not {steps_from!r}")
    try:
        import torch.optim.optimizer as topt
    except ImportError as exc:
        raise CaptureError("capture needs torch: pip install 'traceinsight[capture]'") from exc

    schedule = Schedule(wait=wait, warmup=warmup, active=active)
    prof = Profile(
        output,
        schedule=schedule,
        record_shapes=record_shapes,
        with_stack=with_stack,
        profile_memory=profile_memory,
        interval_s=interval_s,
        nvml=nvml,
        memory_snapshot=memory_snapshot,
    )
    handle = None
    exit_code = 0
    with prof:
        if steps_from == "optimizer":

            def on_step(optimizer: Any, args: Any, kwargs: Any) -> None:
                prof.step()

            handle = topt.register_optimizer_step_post_hook(on_step)
        try:
            exit_code = _run_target(kind, target, argv)
        except KeyboardInterrupt:
            exit_code = 130
        except Exception:
            traceback.print_exc()
            exit_code = 1
        finally:
            if handle is not None:
                handle.remove()
    return RunResult(
        exit_code=exit_code,
        paths=list(prof.paths),
        steps=prof.steps,
        summary=prof.summary,
        nvml_status=prof.sampler.status if prof.sampler is not None else "disabled",
        message=_outcome(prof, schedule, steps_from),
        memory_snapshot=prof.memory_snapshot_path,
    )


def _outcome(prof: Profile, schedule: Schedule, steps_from: StepsFrom) -> str:
    if prof.paths:
        return ", ".join(str(p) for p in prof.paths)
    needed = schedule.skip_first + schedule.wait + schedule.warmup + 1
    source = "optimizer steps" if steps_from == "optimizer" else "calls to step()"
    return (
        f"no steps were recorded: the script made {prof.steps} {source}, and the schedule "
        f"records from step {needed} on (wait={schedule.wait}, warmup={schedule.warmup}); "
        "lower --wait/--warmup, or use --steps-from manual"
    )
