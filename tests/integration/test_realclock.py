"""The un-profiled step: capture times the steps its schedule leaves unprofiled, the loader
reads them, and the window's RealStep uses them, else the calibrated model (replayed)."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.handmade import HandMadeTrace
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.whatif.shared import recorded
from traceinsight.analysis.whatif.transforms import RemoveProfilerCost, TransformError, apply_all
from traceinsight.analysis.whatif.transforms import _segments_in as segments_named
from traceinsight.analysis.window.realstep import COST_US, DEVICE_TOLERANCE, RealStep
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.capture.stepclock import unprofiled
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace, UnprofiledSteps

ADD = "elementwise_kernel_add"


def window(trace: Trace) -> WindowResult:
    result = run_one(trace, "window")
    assert isinstance(result, WindowResult)
    return result


def write(t: HandMadeTrace, path: Path, meta: dict[str, Any] | None = None) -> Trace:
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 143 * 2**30, "numSms": 132}],
        "baseTimeNanoseconds": t.base_ns,
        "traceEvents": t.events,
    }
    if meta is not None:
        doc["traceinsight"] = {"version": "test", "capture": meta}
    path.write_text(json.dumps(doc))
    return load(path, cache=False)


def host_bound(ops: int = 98, step_us: float = 1000.0, kernel_us: float = 10.0) -> HandMadeTrace:
    """Three steps whose one kernel is launched at the step's end after ``ops`` 1 µs ops."""
    t = HandMadeTrace()
    for n in range(3):
        start = n * step_us
        t.step(n + 1, start, step_us)
        for i in range(ops):
            t.host("aten::view", start + 1 + i * (step_us - 20 - kernel_us) / ops, 1.0)
        t.gpu(ADD, start + step_us - 12 - kernel_us, kernel_us)
    return t


def gpu_bound(ops: int = 98, step_us: float = 1000.0) -> HandMadeTrace:
    """Three steps whose kernel, launched at the step's start, runs the whole step."""
    t = HandMadeTrace()
    for n in range(3):
        start = n * step_us
        t.step(n + 1, start, 100.0)
        for i in range(ops):
            t.host("aten::view", start + 1 + i * 0.9, 0.5)
        t.gpu(ADD, start + 95.0, step_us - 5, launch_ts=start + 92)
    return t


# --- capture: which steps the schedule leaves unprofiled -------------------------------------


def test_unprofiled_steps_are_torch_schedules_none_steps() -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerAction, schedule

    for wait, warmup, active, repeat, skip in [(1, 1, 3, 1, 0), (3, 1, 2, 2, 2), (0, 1, 1, 0, 1), (2, 0, 1, 3, 0)]:
        s = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip)
        cycle = wait + warmup + active
        for k in range(30):
            done = repeat > 0 and k >= skip and (k - skip) // cycle >= repeat
            expected = s(k) == ProfilerAction.NONE and not done
            assert unprofiled(k, wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip) is expected, (k, wait)
    del torch


def _train(prof: Any, steps: int) -> None:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    for _ in range(steps):
        model(torch.randn(16, 32)).sum().backward()
        prof.step()


def test_profile_writes_the_wait_steps_and_the_loader_reads_them(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from traceinsight.capture import profile

    out = tmp_path / "run.json.gz"
    with profile(out, schedule={"wait": 3, "warmup": 1, "active": 2}, nvml=False) as p:
        _train(p, 6)
    with gzip.open(out, "rt") as f:
        timed = json.load(f)["traceinsight"]["capture"]["unprofiled_steps"]
    assert timed["step"] == [0, 1, 2] and len(timed["wall_ns"]) == 3 and all(w > 0 for w in timed["wall_ns"])
    assert "device_ns" not in timed and set(timed["timing"]) == {"wall"}  # no CUDA here
    meta = load(out, cache=False).meta.unprofiled_steps
    assert meta == UnprofiledSteps(step=(0, 1, 2), wall_ns=tuple(timed["wall_ns"]), timing=timed["timing"])


def test_the_default_schedule_times_steps_enough_for_a_clock(tmp_path: Path) -> None:
    # a schedule that does not say how many steps to wait waits as capture does: the first
    # wait step holds start-up, the others time the step the findings are priced on
    pytest.importorskip("torch")
    from traceinsight.capture import profile

    out = tmp_path / "run.json.gz"
    with profile(out, schedule={"warmup": 1, "active": 2}, nvml=False) as p:
        _train(p, 6)
    meta = load(out, cache=False).meta.unprofiled_steps
    assert meta is not None and meta.step == (0, 1, 2)  # with wait=1: (0,), start-up only


def test_profile_without_wait_steps_times_none(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from traceinsight.capture import profile

    out = tmp_path / "run.json.gz"
    with profile(out, schedule={"wait": 0, "warmup": 1, "active": 2}, nvml=False) as p:
        _train(p, 3)
    with gzip.open(out, "rt") as f:
        assert "unprofiled_steps" not in json.load(f)["traceinsight"]["capture"]
    assert load(out, cache=False).meta.unprofiled_steps is None


def test_the_trace_keeps_the_timed_steps_when_the_code_raises(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from traceinsight.capture import profile

    out = tmp_path / "raised.json.gz"
    with pytest.raises(RuntimeError, match="boom"), profile(out, schedule={"wait": 2, "warmup": 1, "active": 3}, nvml=False) as p:
        _train(p, 4)
        raise RuntimeError("boom")
    meta = load(out, cache=False).meta.unprofiled_steps
    assert meta is not None and meta.step == (0, 1)


# --- the loader --------------------------------------------------------------------------


GOOD = {"step": [0, 1, 2], "wall_ns": [5_000_000, 2_000_000, 2_200_000], "device_ns": [4_900_000, 2_100_000, None],
        "timing": {"wall": "w", "device": "d"}}


@pytest.mark.parametrize(
    "bad",
    [
        {"step": [0, 1], "wall_ns": [1]},  # lengths differ
        {"step": [0], "wall_ns": ["1"]},  # not integers
        {"step": [0], "wall_ns": [1], "device_ns": [1, 2]},
        {"step": [], "wall_ns": []},
        [1, 2],
        {"step": [True], "wall_ns": [1]},
    ],
)
def test_malformed_timed_steps_are_ignored_with_a_warning(tmp_path: Path, bad: Any) -> None:
    trace = write(host_bound(), tmp_path / "bad.json", {"unprofiled_steps": bad})
    assert trace.meta.unprofiled_steps is None
    assert any("unprofiled_steps" in w for w in trace.meta.warnings)


def test_timed_steps_survive_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEINSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "timed.json"
    write(host_bound(), path, {"unprofiled_steps": GOOD})
    first = load(path)
    second = load(path)
    assert second.meta.from_cache and not first.meta.from_cache
    assert second.meta.unprofiled_steps == first.meta.unprofiled_steps
    assert second.meta.unprofiled_steps == UnprofiledSteps(step=(0, 1, 2), wall_ns=(5_000_000, 2_000_000, 2_200_000),
                                                           device_ns=(4_900_000, 2_100_000, None), timing={"wall": "w", "device": "d"})


# --- RealStep ----------------------------------------------------------------------------


def test_recorded_steps_are_the_clock_and_the_model_is_named_beside_them(tmp_path: Path) -> None:
    real = window(write(host_bound(), tmp_path / "rec.json", {"unprofiled_steps": GOOD})).real_step
    assert real is not None and real.source == "recorded"
    # the run's first step (start-up) is left out; step 2 has no device time: step 1's alone
    assert real.step_ns == real.lo_ns == real.hi_ns == 2_100_000
    assert "CUDA events" in real.method and "the calibrated model estimates" in real.method
    # the traced step: the host's 1 ms step (its host code ends after its kernel)
    assert real.traced_ns == 1_000_000


def test_recorded_wall_clock_when_no_device_time(tmp_path: Path) -> None:
    timed = {"step": [0, 1, 2, 3], "wall_ns": [9_000_000, 700_000, 800_000, 900_000], "timing": {"wall": "w"}}
    real = window(write(host_bound(), tmp_path / "wall.json", {"unprofiled_steps": timed})).real_step
    assert real is not None and real.source == "recorded"
    assert (real.step_ns, real.lo_ns, real.hi_ns) == (800_000, 700_000, 900_000)
    assert "wall clock" in real.method


def test_the_model_takes_each_events_cost_off_a_host_bound_step(tmp_path: Path) -> None:
    # 100 host events a step (98 ops, the step, the launch); the host is the critical path
    trace = write(host_bound(), tmp_path / "host.json")
    real = window(trace).real_step
    assert real is not None and real.source == "model"
    lo_us, hi_us = COST_US
    busy = 10_000
    # (the cost of the few events after the step's launch cannot shorten it: within 3 %)
    assert real.hi_ns == pytest.approx(real.traced_ns - 100 * lo_us * 1e3, rel=0.03)
    assert real.lo_ns == pytest.approx(real.traced_ns - 100 * hi_us * 1e3 - DEVICE_TOLERANCE * busy, rel=0.03)
    assert real.lo_ns < real.step_ns < real.hi_ns < real.traced_ns


def test_the_model_leaves_a_gpu_bound_step_as_traced(tmp_path: Path) -> None:
    # the same 100 events, but the GPU runs the whole step: the profiler's host time is hidden
    trace = write(gpu_bound(), tmp_path / "gpu.json")
    real = window(trace).real_step
    assert real is not None and real.source == "model"
    # (only the first launch, before any queue, moves: under 1 %)
    assert real.traced_ns - real.hi_ns <= 0.01 * real.traced_ns
    assert real.lo_ns >= real.traced_ns - DEVICE_TOLERANCE * 995_000 - 0.01 * real.traced_ns
    assert window(trace).flag("profiler_overhead") is None


def test_the_replayed_estimate_is_not_a_subtraction(tmp_path: Path) -> None:
    # Same events, same traced step, different critical path: the host-bound step loses the
    # cost, the GPU-bound one does not. A per-event subtraction would give both the same.
    host = window(write(host_bound(step_us=1000.0), tmp_path / "a.json")).real_step
    gpu = window(write(gpu_bound(step_us=1000.0), tmp_path / "b.json")).real_step
    assert host is not None and gpu is not None
    assert host.traced_ns - host.hi_ns > 50_000 and gpu.traced_ns - gpu.hi_ns < 10_000


def test_remove_profiler_cost_is_checked() -> None:
    with pytest.raises(TransformError, match="unknown profiler event class"):
        RemoveProfilerCost((("stack", 1.0),))._costs()
    with pytest.raises(TransformError, match="finite number"):
        RemoveProfilerCost((("op", -1.0),))._costs()


def test_remove_profiler_cost_never_makes_host_time_negative_and_keeps_the_total(tmp_path: Path) -> None:
    trace = write(host_bound(), tmp_path / "c.json")
    graph, _ = recorded(trace)
    before = apply_all(graph, ())
    small = apply_all(graph, (RemoveProfilerCost((("op", 500.0), ("runtime", 500.0))),))
    huge = apply_all(graph, (RemoveProfilerCost((("op", 1e9), ("runtime", 1e9))),))
    assert (small.seg_dur_ns >= 0).all() and (huge.seg_dur_ns >= 0).all() and (huge.seg_gap_ns >= 0).all()
    taken = int((before.seg_dur_ns + before.seg_gap_ns).sum() - (small.seg_dur_ns + small.seg_gap_ns).sum())
    events = int(graph.host_events.height)
    # every event's 0.5 µs is taken out somewhere on its thread (rounding aside)
    assert taken == pytest.approx(events * 500, rel=0.02)


def test_remove_profiler_cost_leaves_a_driver_calls_own_time(tmp_path: Path) -> None:
    # A 300 µs cudaMalloc among the ops of a host-bound step: the driver's time is not the
    # profiler's. Only a call's own per-event cost comes out of it; the rest of the cost comes
    # out of the operators' dispatch around it, so removing the call afterwards saves its time.
    t = HandMadeTrace()
    for n in range(3):
        start = n * 1000.0
        t.step(n + 1, start, 1000.0)
        for i in range(60):  # 60 ops of 1 µs, 5 µs apart, before the call; 30 after it
            t.host("aten::view", start + 1 + i * 5.0, 1.0)
        t.host("cudaMalloc", start + 310.0, 300.0, cat="cuda_runtime")
        for i in range(30):
            t.host("aten::view", start + 620 + i * 10.0, 1.0)
        t.gpu(ADD, start + 978.0, 10.0)
    trace = write(t, tmp_path / "m.json")
    graph, _ = recorded(trace)
    before = apply_all(graph, ())
    cost = 2_000.0
    after = apply_all(graph, (RemoveProfilerCost((("op", cost), ("runtime", cost))),))
    calls = segments_named(graph, "^cudaMalloc$")
    assert calls.sum() == 3
    assert (after.seg_dur_ns[calls] >= before.seg_dur_ns[calls] - cost).all()
    assert (after.seg_dur_ns[calls] < before.seg_dur_ns[calls]).all()
    taken = int((before.seg_dur_ns + before.seg_gap_ns).sum() - (after.seg_dur_ns + after.seg_gap_ns).sum())
    assert taken == pytest.approx(int(graph.host_events.height) * cost, rel=0.02)


def test_real_step_to_dict_is_json_safe() -> None:
    real = RealStep(step_ns=2, lo_ns=1, hi_ns=3, traced_ns=4, source="model", method="m")
    assert json.loads(json.dumps(real.to_dict())) == {"step_ns": 2, "lo_ns": 1, "hi_ns": 3, "traced_ns": 4,
                                                       "source": "model", "method": "m"}
    assert (real.cost_lo_ns, real.cost_ns, real.cost_hi_ns) == (1, 2, 3)


def test_decode_loop_without_profiler_steps_falls_back_to_a_bounded_subtraction(sample_trace: Any) -> None:
    # iterations found from a repeated span: the replay has no steps to give back
    trace = sample_trace("decode/decode_eager")
    result = window(trace)
    real = result.real_step
    assert real is not None and real.source == "model" and "subtracting" in real.method
    steps = run_one(trace, "steps").steps  # type: ignore[attr-defined]
    busy = statistics.median(steps["kernel_ns"] + steps["memcpy_ns"] + steps["memset_ns"])
    assert real.lo_ns >= (1 - DEVICE_TOLERANCE) * busy - 1
    # decode_timings.json: 5.45 ms per token without the profiler
    assert real.lo_ns <= 5_450_000 <= real.hi_ns


def test_the_runs_first_step_alone_is_no_clock(tmp_path: Path) -> None:
    # capture with wait=1 times step 0 only: start-up, so the model stays the clock and says why
    timed = {"step": [0], "wall_ns": [900_000_000], "device_ns": [899_000_000], "timing": {"wall": "w", "device": "d"}}
    real = window(write(host_bound(), tmp_path / "first.json", {"unprofiled_steps": timed})).real_step
    assert real is not None and real.source == "model"
    assert "only the run's first step" in real.method and real.hi_ns < real.traced_ns


def test_a_timing_failure_never_costs_the_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from traceinsight.capture import profile
    from traceinsight.capture.stepclock import StepClock

    def broken(self: StepClock) -> None:
        raise RuntimeError("event lost")

    monkeypatch.setattr(StepClock, "meta", broken)
    out = tmp_path / "run.json.gz"
    with profile(out, schedule={"wait": 2, "warmup": 1, "active": 1}, nvml=False) as p:
        _train(p, 4)
    assert p.paths == [out]
    assert load(out, cache=False).meta.unprofiled_steps is None
