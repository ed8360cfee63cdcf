"""The ground truth the recording scripts print: a step's time outside the profiler."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


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
