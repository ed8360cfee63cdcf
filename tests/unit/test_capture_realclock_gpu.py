"""Live on a CUDA GPU: capture times the steps its schedule leaves unprofiled, and those times
are the program's step (a plain loop timed by CUDA events beside it agrees).

Needs torch with CUDA; no polars (runs alone on a GPU box with
``pytest -m gpu tests/unit/test_capture_realclock_gpu.py``).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from traceinsight.capture import counters as C  # noqa: E402
from traceinsight.capture import profile  # noqa: E402
from traceinsight.capture.merge import read_trace  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def gemm_step(n: int = 4096, count: int = 8) -> object:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)

    def step() -> None:
        for _ in range(count):
            torch.matmul(a, b, out=c)

    return step


def plain_step_ns(step: object, steps: int = 10) -> float:
    events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    torch.cuda.synchronize()
    events[0].record()
    for i in range(steps):
        step()  # type: ignore[operator]
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) * 1e6 for i in range(steps))


def test_capture_writes_the_wait_steps_device_and_wall_times(tmp_path: Path) -> None:
    step = gemm_step()
    for _ in range(3):
        step()  # type: ignore[operator]
    plain_ns = plain_step_ns(step)
    out = tmp_path / "run.json.gz"
    schedule = {"wait": 4, "warmup": 1, "active": 2}
    with profile(out, schedule=schedule, nvml=False) as p:
        for _ in range(7):
            step()  # type: ignore[operator]
            p.step()
    timed = read_trace(out)[C.TRACE_META_KEY]["capture"]["unprofiled_steps"]
    assert timed["step"] == [0, 1, 2, 3]
    assert len(timed["wall_ns"]) == 4 and all(w > 0 for w in timed["wall_ns"])
    assert "device" in timed["timing"]
    # Step 0 starts at the profiler's entry, before a CUDA event could be taken there only
    # if CUDA was initialised: it is, so every step has its device time.
    device = timed["device_ns"]
    assert all(d is not None and d > 0 for d in device), device
    # GPU-bound: each un-profiled step's device time is the plain step's (±25 %)
    steady = statistics.median(device[1:])
    assert 0.75 * plain_ns <= steady <= 1.25 * plain_ns, (steady, plain_ns)


def test_no_schedule_times_no_step(tmp_path: Path) -> None:
    step = gemm_step(count=1)
    out = tmp_path / "all.json.gz"
    with profile(out, nvml=False) as p:
        for _ in range(3):
            step()  # type: ignore[operator]
            p.step()
    assert "unprofiled_steps" not in read_trace(out)[C.TRACE_META_KEY]["capture"]
