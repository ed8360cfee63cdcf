"""What the recording scripts share: a step's time outside the profiler (the ground truth they
print), and the profiled run of the same step."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from traceinsight.capture import Schedule, profile

# Steps skipped, warmed up and recorded by every profiled pair.
SCHEDULE = Schedule(wait=1, warmup=2, active=4)
N_STEPS = SCHEDULE.wait + SCHEDULE.warmup + SCHEDULE.active


def time_step(step: Callable[[], object], cuda: bool, warmup: int = 3, iters: int = 10) -> float:
    """Mean ms per call of ``step`` over ``iters`` calls after ``warmup`` ones: CUDA events on a
    GPU (what the device took, idle included), ``perf_counter`` on the CPU."""
    for _ in range(warmup):
        step()
    if not cuda:
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        return (time.perf_counter() - t0) * 1e3 / iters
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / iters


def record(step: Callable[[], object], path: Path, cuda: bool, **kw: Any) -> Path:
    """Profile ``N_STEPS`` calls of ``step`` on ``SCHEDULE`` with shapes (and ``kw``: with_stack,
    profile_memory, ...) into ``path``; the path written."""
    with profile(path, schedule=SCHEDULE, record_shapes=True, **kw) as prof:
        for _ in range(N_STEPS):
            step()
            prof.step()
    if cuda:
        torch.cuda.synchronize()
    return prof.paths[0] if prof.paths else path
