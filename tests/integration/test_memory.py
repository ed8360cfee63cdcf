"""Memory analysis: peaks, allocation matching and attribution at the peak, step-end growth.

The small fixtures are hand-made Kineto-like traces (written by hand, not recorded): they
carry ``[memory]`` instant events like those profile_memory writes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from tests.conftest import sample_names
from tests.handmade import HOST_PID, MAIN_TID, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections import memory
from traceinsight.render.sections.memory import render_terminal
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

MiB = 2**20


class Allocator:
    """Writes [memory] events and keeps the running totals the allocator would report."""

    def __init__(self, device: int = 0, device_type: int = 1) -> None:
        self.device, self.device_type = device, device_type
        self.allocated = 0
        self.reserved = 0
        self.events: list[dict[str, Any]] = []

    def event(self, ts: float, addr: int, nbytes: int, *, tid: int = MAIN_TID) -> None:
        self.allocated += nbytes
        self.reserved = max(self.reserved, self.allocated)
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": HOST_PID,
                "tid": tid,
                "ts": ts,
                "args": {
                    "Total Reserved": self.reserved,
                    "Total Allocated": self.allocated,
                    "Bytes": nbytes,
                    "Addr": addr,
                    "Device Id": self.device,
                    "Device Type": self.device_type,
                },
            }
        )


def _load(tmp_path: Path, events: list[dict[str, Any]]) -> Trace:
    return load(write_trace(tmp_path / "mem.json", events, baseTimeNanoseconds=10**18), cache=False)


def test_peak_and_the_ops_holding_memory_there(tmp_path: Path) -> None:
    a = Allocator()
    events = [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("aten::linear", 10, 100),
        op("aten::empty", 20, 5),
        op("aten::relu", 200, 50),
        op("aten::add", 300, 50),
    ]
    a.event(22, 0x1000, 4 * MiB)  # inside aten::empty (innermost), inside aten::linear
    a.event(40, 0x2000, 1 * MiB)  # inside aten::linear after aten::empty ended
    a.event(210, 0x3000, 2 * MiB)  # relu
    a.event(220, 0x2000, -1 * MiB)  # linear's second block freed before the peak
    a.event(310, 0x2000, 3 * MiB)  # same address reused by add: the peak, 9 MiB
    a.event(320, 0x3000, -2 * MiB)
    a.event(330, 0x2000, -3 * MiB)
    a.event(500, 0x4000, 1 * MiB)  # outside any op
    r = memory.run(_load(tmp_path, events + a.events), AnalysisConfig())
    assert r.available
    peak = r.peaks.row(0, named=True)
    assert peak["device"] == "cuda:0"
    assert peak["peak_allocated_bytes"] == 9 * MiB
    assert peak["peak_allocated_ns"] == 310_000  # ns from the trace's base time
    assert peak["peak_allocated_step"] == 1
    assert peak["traced_at_peak_bytes"] == 9 * MiB
    held = dict(zip(r.top_ops["op_name"], r.top_ops["bytes"], strict=True))
    assert held == {"aten::empty": 4 * MiB, "aten::add": 3 * MiB, "aten::relu": 2 * MiB}
    assert r.top_ops["op_name"].to_list()[0] == "aten::empty"  # most bytes first
    # aten::empty allocated for its caller, which is named beside it
    callers = dict(zip(r.top_ops["op_name"], r.top_ops["called_from"], strict=True))
    assert callers == {"aten::empty": "aten::linear", "aten::add": None, "aten::relu": None}
    assert r.top_ops["share_of_peak_pct"].to_list()[0] == pytest.approx(100 * 4 / 9)


def test_allocations_before_the_trace_show_as_untraced(tmp_path: Path) -> None:
    a = Allocator()
    a.allocated = 10 * MiB  # already held when the profiler started
    a.event(5, 0x10, 1 * MiB)
    r = memory.run(_load(tmp_path, [op("aten::zeros", 0, 10), *a.events]), AnalysisConfig())
    peak = r.peaks.row(0, named=True)
    assert peak["peak_allocated_bytes"] == 11 * MiB
    assert peak["traced_at_peak_bytes"] == 1 * MiB


def test_allocation_outside_any_op_is_reported_as_such(tmp_path: Path) -> None:
    a = Allocator()
    a.event(50, 0x10, 1 * MiB)
    r = memory.run(_load(tmp_path, [op("aten::zeros", 0, 10), *a.events]), AnalysisConfig())
    assert r.top_ops["op_name"].to_list() == [memory.NO_OP]


def _steps_with(allocations_per_step: list[list[tuple[int, int]]]) -> list[dict[str, Any]]:
    """Steps 1..N of 100 µs; each step makes the (addr, bytes) events listed for it."""
    a = Allocator()
    events: list[dict[str, Any]] = []
    for i, step_events in enumerate(allocations_per_step):
        t0 = i * 100.0
        events.append(op(f"ProfilerStep#{i + 1}", t0, 100, cat="user_annotation"))
        events.append(op("aten::forward", t0 + 1, 90))
        for j, (addr, nbytes) in enumerate(step_events):
            a.event(t0 + 2 + j, addr, nbytes)
    return events + a.events


def test_leak_growth_every_step_is_flagged(tmp_path: Path) -> None:
    # Each step allocates a fresh 1 MiB block it never frees, plus scratch it does free.
    steps = [[(0x100 * (i + 1), MiB), (0x9000, 8 * MiB), (0x9000, -8 * MiB)] for i in range(5)]
    r = memory.run(_load(tmp_path, _steps_with(steps)), AnalysisConfig())
    assert r.step_ends["allocated_bytes"].to_list() == [MiB * n for n in range(1, 6)]
    assert r.step_ends["delta_bytes"].to_list() == [None, MiB, MiB, MiB, MiB]
    assert len(r.leaks) == 1
    leak = r.leaks[0]
    assert (leak.device, leak.first_step, leak.last_step, leak.steps) == ("cuda:0", 1, 5, 5)
    assert leak.growth_bytes == 4 * MiB
    assert leak.growth_per_step_bytes == pytest.approx(MiB)


def test_no_leak_when_memory_is_flat(tmp_path: Path) -> None:
    steps = [[(0x9000, 8 * MiB), (0x100, MiB), (0x9000, -8 * MiB), (0x100, -MiB)] for _ in range(5)]
    r = memory.run(_load(tmp_path, _steps_with(steps)), AnalysisConfig())
    assert r.step_ends["allocated_bytes"].to_list() == [0] * 5
    assert r.leaks == ()


def test_no_leak_for_warm_up_growth_that_stops(tmp_path: Path) -> None:
    # Grows over the first steps (optimizer state, caches), then stays flat.
    steps = [[(0x100, MiB)], [(0x200, MiB)], [(0x300, MiB)], [], []]
    r = memory.run(_load(tmp_path, _steps_with(steps)), AnalysisConfig())
    assert r.leaks == ()


def test_growth_below_tolerance_is_not_a_leak(tmp_path: Path) -> None:
    steps = [[(0x100 * (i + 1), 512)] for i in range(6)]
    r = memory.run(_load(tmp_path, _steps_with(steps)), AnalysisConfig())
    assert r.leaks == ()


def test_two_steps_are_too_few_to_call_a_leak(tmp_path: Path) -> None:
    steps = [[(0x100, MiB)], [(0x200, MiB)]]
    r = memory.run(_load(tmp_path, _steps_with(steps)), AnalysisConfig())
    assert r.step_ends.height == 2 and r.leaks == ()


def test_devices_are_kept_apart(tmp_path: Path) -> None:
    gpu0, gpu1, cpu = Allocator(0), Allocator(1), Allocator(-1, device_type=0)
    gpu0.event(1, 0x10, 5 * MiB)
    gpu1.event(2, 0x10, 7 * MiB)  # the same address on another device is another block
    cpu.event(3, 0x10, 64 * MiB)
    gpu0.event(4, 0x10, -5 * MiB)
    r = memory.run(_load(tmp_path, [op("aten::to", 0, 10), *gpu0.events, *gpu1.events, *cpu.events]), AnalysisConfig())
    peaks = dict(zip(r.peaks["device"], r.peaks["peak_allocated_bytes"], strict=True))
    assert peaks == {"cuda:0": 5 * MiB, "cuda:1": 7 * MiB, "cpu": 64 * MiB}
    assert r.peaks["device"].to_list() == ["cuda:0", "cuda:1", "cpu"]
    assert not r.has_steps and r.step_ends.height == 0


def test_a_few_bytes_of_cpu_total_are_not_a_peak(tmp_path: Path) -> None:
    gpu0, cpu = Allocator(0), Allocator(-1, device_type=0)
    gpu0.event(1, 0x10, 5 * MiB)
    cpu.event(2, 0x10, 16)
    r = memory.run(_load(tmp_path, [op("aten::to", 0, 10), *gpu0.events, *cpu.events]), AnalysisConfig())
    assert r.peaks["device"].to_list() == ["cuda:0"]
    assert any(note.startswith("cpu: peak allocated 16 B") for note in r.notes)


def test_without_memory_events_says_why(tmp_path: Path) -> None:
    r = memory.run(_load(tmp_path, [op("aten::add", 0, 10)]), AnalysisConfig())
    assert not r.available
    assert r.reason == "trace recorded without profile_memory"
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("name", sample_names())
def test_runs_and_renders_on_every_sample(name: str, sample_trace: Any) -> None:
    trace = sample_trace(name)
    r = memory.run(trace, AnalysisConfig())
    assert r.available == (trace.memory.height > 0)
    json.dumps(r.to_dict(), allow_nan=False)
    if r.available:
        out = io.StringIO()
        Console(file=out, width=120).print(render_terminal(r))
        assert "peak allocated" in out.getvalue()


def test_train_eager_peak_and_top_ops(sample_trace: Any) -> None:
    r = memory.run(sample_trace("train_eager"), AnalysisConfig())
    gpu = r.peaks.filter(pl.col("device") == "cuda:0").row(0, named=True)
    assert gpu["peak_allocated_bytes"] > 0
    assert gpu["peak_reserved_bytes"] >= gpu["peak_allocated_bytes"]
    assert 0 < gpu["traced_at_peak_bytes"] <= gpu["peak_allocated_bytes"]
    held = r.top_ops.filter(pl.col("device") == "cuda:0")
    assert held.height > 0
    assert held["op_name"].str.starts_with("aten::").any()
    # the callers of allocation helpers are real ops, never helpers themselves
    callers = held["called_from"].drop_nulls()
    assert callers.len() > 0
    assert not callers.is_in(list(memory.ALLOCATION_HELPERS)).any()
    # A healthy training loop: flat memory at step end, nothing to flag.
    assert r.step_ends.height >= 3
    assert r.leaks == ()


def _record_cpu_training(path: Path, *, leak: bool) -> Path:
    """A real torch.profiler capture on the CPU: a small MLP trained for 5 recorded steps,
    optionally keeping one new 256 KiB tensor per step (a leak)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = []
    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        schedule=schedule(wait=1, warmup=1, active=5),
    ) as prof:
        for _ in range(7):
            loss = model(torch.randn(32, 64)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if leak:
                kept.append(torch.ones(256, 256))
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


@pytest.mark.parametrize("leak", [True, False])
def test_recorded_cpu_training_leak_or_not(tmp_path: Path, leak: bool) -> None:
    trace = load(_record_cpu_training(tmp_path / "cpu.json", leak=leak), cache=False)
    r = memory.run(trace, AnalysisConfig())
    assert r.available and r.step_ends.height == 5
    if leak:
        assert [x.device for x in r.leaks] == ["cpu"]
        assert r.leaks[0].growth_per_step_bytes == pytest.approx(256 * 256 * 4, rel=0.05)
    else:
        assert r.leaks == ()
