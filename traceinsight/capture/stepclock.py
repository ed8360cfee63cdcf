"""Time the steps that run without the profiler: the program's own clock, beside its trace.

A profiled step is longer than the program's step by the profiler's own host time. The steps a
schedule leaves unrecorded (``skip_first`` and the ``wait`` steps of each cycle) run without it;
timing them gives the real step to compare the traced one with. Each step boundary (entering
the profiler, each ``step()``) is stamped with the host's clock and, with CUDA, a CUDA event on
the current stream, so a step's device time is what the stream took between two boundaries,
queued work included (the device's throughput, not a sum of kernels). No synchronisation is
added inside the loop: events are read when the trace is written.

Needs torch only where CUDA events are used, imported lazily; never polars.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

# What the trace's metadata says about how the steps were timed (read by the loader).
WALL_TIMING = "host perf_counter between step() calls"
DEVICE_TIMING = "CUDA events on the current stream at each step() call"


def unprofiled(step: int, *, wait: int, warmup: int, active: int, repeat: int, skip_first: int) -> bool:
    """Whether torch.profiler's schedule leaves step ``step`` (0-based) unrecorded: its action
    is NONE (torch.profiler.schedule's arithmetic, from which this must not drift)."""
    if step < skip_first:
        return True
    step -= skip_first
    cycle = wait + warmup + active
    if repeat > 0 and step // cycle >= repeat:
        # past the last cycle: the profiler is done; those steps are not timed (the trace is written)
        return False
    return step % cycle < wait


@dataclass
class _Boundary:
    wall_ns: int
    event: Any  # a torch.cuda.Event, or None


class StepClock:
    """Stamps step boundaries; keeps the steps the profiler did not record."""

    def __init__(self, schedule: dict[str, int] | None) -> None:
        self._schedule = schedule
        self._cuda = False
        self._torch: Any = None
        self._last: _Boundary | None = None
        self._step = 0
        # step index, wall ns, start and end event (None without CUDA)
        self._done: list[tuple[int, int, Any, Any]] = []

    def _is_unprofiled(self, step: int) -> bool:
        return self._schedule is not None and unprofiled(step, **self._schedule)

    def start(self) -> None:
        """At profiler entry: step 0 starts."""
        self._step = 0
        self._done = []
        try:
            import torch

            self._torch = torch
            # Typed as Any: torch's stubs differ between builds (and torch is absent where the
            # analysis is type-checked).
            cuda: Any = torch.cuda
            self._cuda = bool(cuda.is_available()) and bool(cuda.is_initialized())
        except Exception:  # never let timing break the user's run
            self._cuda = False
        self._last = self._stamp(self._is_unprofiled(0))

    def _stamp(self, with_event: bool) -> _Boundary:
        event = None
        if with_event and self._torch is not None:
            # CUDA is used only once the program has initialised it: creating a context here
            # would change what the program does.
            with contextlib.suppress(Exception):
                if not self._cuda and self._torch.cuda.is_available() and self._torch.cuda.is_initialized():
                    self._cuda = True
                if self._cuda:
                    event = self._torch.cuda.Event(enable_timing=True)
                    event.record()
        return _Boundary(time.perf_counter_ns(), event)

    def step(self) -> None:
        """At each ``step()``: the step that just ended is kept when the profiler left it out."""
        ended, last = self._step, self._last
        self._step += 1
        # an event where a timed step ends or starts
        now = self._stamp(self._is_unprofiled(ended) or self._is_unprofiled(self._step))
        if last is not None and self._is_unprofiled(ended):
            end_event = now.event if last.event is not None else None
            self._done.append((ended, now.wall_ns - last.wall_ns, last.event, end_event))
        self._last = now

    def meta(self) -> dict[str, Any] | None:
        """The timed steps for the trace's metadata (None when none ran): step indices, wall ns
        and device ns per step (device ns only where both boundaries have a CUDA event)."""
        if not self._done:
            return None
        device: list[int | None] = []
        for _, _, start, end in self._done:
            ns = None
            if start is not None and end is not None:
                with contextlib.suppress(Exception):
                    end.synchronize()
                    ns = round(start.elapsed_time(end) * 1e6)
            device.append(ns)
        out: dict[str, Any] = {
            "step": [s for s, _, _, _ in self._done],
            "wall_ns": [w for _, w, _, _ in self._done],
            "timing": {"wall": WALL_TIMING},
        }
        if any(d is not None for d in device):
            out["device_ns"] = device
            out["timing"]["device"] = DEVICE_TIMING
        return out
