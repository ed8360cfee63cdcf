"""``profile``: torch.profiler with sane defaults, NVML counters, and a trace that is never lost."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from traceinsight.capture.distributed import dist_rank
from traceinsight.capture.memsnap import DEFAULT_MAX_ENTRIES, MemoryHistory, snapshot_path
from traceinsight.capture.merge import merge_samples, read_trace, write_trace_atomic
from traceinsight.capture.nvml import NvmlSampler
from traceinsight.capture.stepclock import StepClock
from traceinsight.errors import CaptureError

if TYPE_CHECKING:
    from traceinsight.capture.monitor import GpuSummary

log = logging.getLogger("traceinsight.capture")

_active: list[Profile] = []


def current_profiler() -> Profile | None:
    """The innermost running :class:`Profile`, for scripts that call ``step()`` themselves."""
    return _active[-1] if _active else None


@dataclass(frozen=True)
class Schedule:
    """torch.profiler schedule: skip ``skip_first`` steps, then cycles of wait/warmup/active.

    ``repeat=0`` repeats until the profiler stops; each cycle is written to its own file.
    The default waits 3 steps, as ``traceinsight capture`` does: the wait steps run without the
    profiler and are timed, and the first holds start-up, so 3 leave two to time the step by.
    """

    wait: int = 3
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        if self.active < 1 or min(self.wait, self.warmup, self.repeat, self.skip_first) < 0:
            raise CaptureError(f"invalid schedule {self}: active must be >= 1, others >= 0")

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _as_schedule(schedule: Schedule | Mapping[str, int] | None) -> Schedule | None:
    if schedule is None or isinstance(schedule, Schedule):
        return schedule
    return Schedule(**dict(schedule))


def _split_name(path: Path) -> tuple[Path, str, str]:
    name = path.name
    for ext in (".json.gz", ".json"):
        if name.endswith(ext) and len(name) > len(ext):
            return path.parent, name[: -len(ext)], ext
    return path.parent, name, ".json.gz"


def output_path(path: str | os.PathLike[str], *, cycle: int | None = None) -> Path:
    """Where a trace goes: adds ``.rank<N>`` under torch.distributed and ``.cycle<N>`` per cycle."""
    p = Path(path)
    if p.is_dir():
        p = p / "trace.json.gz"
    parent, stem, ext = _split_name(p)
    rank = dist_rank()
    if rank is not None:
        stem += f".rank{rank}"
    if cycle is not None:
        stem += f".cycle{cycle}"
    return parent / f"{stem}{ext}"


class Profile(contextlib.ContextDecorator):
    """Context manager and decorator; see :func:`profile`."""

    def __init__(
        self,
        path: str | os.PathLike[str] = "trace.json.gz",
        *,
        schedule: Schedule | Mapping[str, int] | None = None,
        record_shapes: bool = True,
        with_stack: bool = False,
        profile_memory: bool = False,
        with_modules: bool = False,
        activities: Sequence[Any] | None = None,
        nvml: bool = True,
        interval_s: float = 0.1,
        devices: Sequence[int] | None = None,
        gpm: bool = True,
        memory_snapshot: bool = False,
        memory_max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        self.path = Path(path)
        self._memory = MemoryHistory(memory_max_entries) if memory_snapshot else None
        self.memory_snapshot_path: Path | None = None  # set once the snapshot is written
        self.schedule = _as_schedule(schedule)
        self.options = {
            "record_shapes": record_shapes,
            "with_stack": with_stack,
            "profile_memory": profile_memory,
            "with_modules": with_modules,
        }
        self._activities = activities
        self._nvml = nvml
        self.interval_s = interval_s
        self._devices = devices
        self._gpm = gpm
        self.paths: list[Path] = []
        self.steps = 0
        self.sampler: NvmlSampler | None = None
        self.summary: GpuSummary | None = None
        self._prof: Any = None
        self._cycle = 0
        self._start_ns = 0
        self._errors: list[BaseException] = []
        # the steps the schedule leaves unrecorded, timed: the program's own step
        self._clock = StepClock(self.schedule.to_dict() if self.schedule is not None else None)

    @property
    def torch_profiler(self) -> Any:
        """The underlying ``torch.profiler.profile`` (None outside the context)."""
        return self._prof

    def step(self) -> None:
        """Mark the end of a step; drives the schedule (forwards to torch.profiler's step)."""
        self.steps += 1
        if self._prof is not None:
            # stamped before the profiler's step: its switch to warm-up belongs to the next step
            self._clock.step()
            self._prof.step()

    def _multi_cycle(self) -> bool:
        return self.schedule is not None and self.schedule.repeat != 1

    def __enter__(self) -> Profile:
        try:
            import torch
            import torch.profiler as tp
        except ImportError as exc:
            raise CaptureError("capture needs torch: pip install 'traceinsight[capture]'") from exc
        self.paths, self.steps, self._cycle, self._errors = [], 0, 0, []
        self.summary = None
        activities = self._activities
        if activities is None:
            activities = [tp.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(tp.ProfilerActivity.CUDA)
        kwargs: dict[str, Any] = {}
        if self.schedule is not None:
            s = self.schedule
            kwargs["schedule"] = tp.schedule(
                wait=s.wait,
                warmup=s.warmup,
                active=s.active,
                repeat=s.repeat,
                skip_first=s.skip_first,
            )
        self._prof = tp.profile(
            activities=activities,
            on_trace_ready=self._on_trace_ready,
            record_shapes=self.options["record_shapes"],
            with_stack=self.options["with_stack"],
            profile_memory=self.options["profile_memory"],
            with_modules=self.options["with_modules"],
            **kwargs,
        )
        self._start_ns = time.time_ns()
        self.memory_snapshot_path = None
        if self._memory is not None and not self._memory.start():
            log.warning("traceinsight: no memory snapshot: %s", self._memory.reason)
        if self._nvml:
            self.sampler = NvmlSampler(self._devices, interval_s=self.interval_s, gpm=self._gpm)
            self.sampler.start()
        else:
            self.sampler = None
        try:
            self._prof.__enter__()
        except BaseException:
            if self.sampler is not None:
                self.sampler.stop()
            if self._memory is not None:
                self._memory.stop()
            raise
        self._clock.start()
        _active.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        end_ns = time.time_ns()
        try:
            # Stopping the profiler calls on_trace_ready for the cycle in progress, which
            # writes the trace, also when the profiled code raised.
            self._prof.__exit__(exc_type, exc, tb)
        except Exception as stop_exc:
            self._errors.append(stop_exc)
        finally:
            if self in _active:
                _active.remove(self)
            self._prof = None
            if self.sampler is not None:
                self.sampler.stop()
            self.summary = self._summarize(end_ns)
            # After the profiler has stopped (its own buffers are freed), and whether or not the
            # profiled code raised: an out-of-memory error is when the snapshot matters most.
            self._dump_memory()
        if self._errors and exc is None:
            first = self._errors[0]
            if isinstance(first, CaptureError):  # says itself what it could not write
                raise first
            raise CaptureError(f"could not write the trace to {self.path}: {first}") from first
        for err in self._errors:
            log.error(
                "traceinsight: %s",
                err if isinstance(err, CaptureError) else f"could not write the trace: {err}",
            )
        return False

    def _dump_memory(self) -> None:
        if self._memory is None or not self._memory.recording:
            return
        target = snapshot_path(output_path(self.path))
        try:
            self.memory_snapshot_path = self._memory.dump(target)
        except Exception as exc:
            self._errors.append(
                CaptureError(f"could not write the memory snapshot to {target}: {exc}")
            )

    def _summarize(self, end_ns: int) -> GpuSummary | None:
        if self.sampler is None or not self.sampler.devices:
            return None
        from traceinsight.capture.monitor import summarize

        dev = self.sampler.devices[0].index
        samples = [s for s in self.sampler.samples(self._start_ns, end_ns) if s.device == dev]
        return summarize(samples, self._start_ns, end_ns)

    def capture_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = (
            self.sampler.meta()
            if self.sampler is not None
            else {
                "nvml": "disabled",
                "gpm": "disabled",
                "interval_s": self.interval_s,
                "devices": [],
            }
        )
        meta["schedule"] = self.schedule.to_dict() if self.schedule is not None else None
        meta["options"] = dict(self.options)
        meta["steps"] = self.steps
        try:
            timed = self._clock.meta()
        except Exception as exc:  # the trace matters more than its timed steps
            log.warning("traceinsight: the steps run without the profiler were not timed: %s", exc)
            timed = None
        if timed is not None:
            meta["unprofiled_steps"] = timed
        rank = dist_rank()
        if rank is not None:
            meta["rank"] = rank
        return meta

    def _on_trace_ready(self, prof: Any) -> None:
        self._cycle += 1
        target = output_path(self.path, cycle=self._cycle if self._multi_cycle() else None)
        try:
            self._write(prof, target)
        except Exception as exc:
            # Raising here would unwind through torch.profiler; report it from __exit__.
            self._errors.append(exc)

    def _write(self, prof: Any, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, raw_path = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".kineto.json", dir=target.parent
        )
        os.close(fd)
        try:
            prof.export_chrome_trace(raw_path)
            trace = read_trace(raw_path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(raw_path)
        samples = self.sampler.samples() if self.sampler is not None else []
        meta = self.capture_meta()
        meta["cycle"] = self._cycle
        margin_ns = int(self.interval_s * 1e9)
        merge_samples(trace, samples, meta, fallback_base_ns=self._start_ns, margin_ns=margin_ns)
        write_trace_atomic(trace, target)
        self.paths.append(target)
        log.info("traceinsight: wrote %s", target)


def profile(
    path: str | os.PathLike[str] = "trace.json.gz",
    *,
    schedule: Schedule | Mapping[str, int] | None = None,
    record_shapes: bool = True,
    with_stack: bool = False,
    profile_memory: bool = False,
    with_modules: bool = False,
    activities: Sequence[Any] | None = None,
    nvml: bool = True,
    interval_s: float = 0.1,
    devices: Sequence[int] | None = None,
    gpm: bool = True,
    memory_snapshot: bool = False,
    memory_max_entries: int = DEFAULT_MAX_ENTRIES,
) -> Profile:
    """Profile a block or function with torch.profiler and NVML counters; write ``*.json.gz``.

    Use as ``with profile("run.json.gz", schedule=dict(wait=3, warmup=1, active=3)) as p:`` and
    call ``p.step()`` once per training step, or as a decorator. Without a schedule everything
    inside the block is recorded. The trace is written atomically, with ``.rank<N>`` in the name
    under torch.distributed and ``.cycle<N>`` when the schedule repeats, and it is written even
    when the profiled code raises (the exception then propagates).

    The steps the schedule leaves unrecorded (``skip_first`` and each cycle's ``wait`` steps)
    run without the profiler: each is timed (host clock, and CUDA events once the program has
    initialised CUDA) and written into the trace's metadata (``unprofiled_steps``), the clock
    ``analyze`` states the step without the profiler from. Use ``wait`` ≥ 2 (the default
    schedule's is 3): the first step holds start-up.

    ``memory_snapshot=True`` (on a machine with CUDA) also records the CUDA allocator's history
    (the last ``memory_max_entries`` events, with Python stacks) from the start of the block and
    writes it beside the trace as ``<name>.memory.pickle`` when the block ends, also when it
    raises (an out-of-memory error included); ``traceinsight memory`` reads it.
    """
    return Profile(
        path,
        schedule=schedule,
        record_shapes=record_shapes,
        with_stack=with_stack,
        profile_memory=profile_memory,
        with_modules=with_modules,
        activities=activities,
        nvml=nvml,
        interval_s=interval_s,
        devices=devices,
        gpm=gpm,
        memory_snapshot=memory_snapshot,
        memory_max_entries=memory_max_entries,
    )
