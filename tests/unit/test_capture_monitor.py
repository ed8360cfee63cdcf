"""GpuSummary arithmetic, and GpuMonitor / gpu_profile over a fake pynvml (no torch needed)."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_pynvml import NVMLError, install

from traceinsight.capture import GpuMonitor, GpuSummary, gpu_profile, monitor, summarize
from traceinsight.capture import counters as C
from traceinsight.capture.nvml import Sample, UtilWindow

S = 1_000_000_000
NVML_ERROR_NOT_FOUND = 6


def driver_samples(
    monkeypatch: pytest.MonkeyPatch,
    busy_pct: Callable[[int, int], float],
    *,
    period_s: float = 0.02,
    clock_offset_ns: int = 0,
) -> list[int]:
    """Give the installed fake pynvml ``nvmlDeviceGetSamples``: the driver's utilization
    samples every ``period_s`` (from 1 s before now), each worth ``busy_pct(start_ns, end_ns)``
    of the span since the previous one. Returns the ``lastSeenTimeStamp`` of every call."""
    module = sys.modules["pynvml"]
    origin_ns = time.time_ns() - S
    period_ns = int(period_s * S)
    asked: list[int] = []

    def get_samples(handle: int, kind: int, last_seen_us: int) -> tuple[int, list[object]]:
        assert kind == module.NVML_GPU_UTILIZATION_SAMPLES
        asked.append(last_seen_us)
        out = []
        for k in range(1, (time.time_ns() - origin_ns) // period_ns + 1):
            end_ns = origin_ns + k * period_ns
            ts_us = (end_ns + clock_offset_ns) // 1000
            if ts_us > last_seen_us:
                pct = busy_pct(end_ns - period_ns, end_ns)
                out.append(SimpleNamespace(timeStamp=ts_us, sampleValue=SimpleNamespace(uiVal=pct)))
        if not out:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return 1, out  # NVML_VALUE_TYPE_UNSIGNED_INT

    monkeypatch.setattr(module, "NVML_GPU_UTILIZATION_SAMPLES", 1, raising=False)
    monkeypatch.setattr(module, "nvmlDeviceGetSamples", get_samples, raising=False)
    return asked


def busy_before(t_ns: int) -> Callable[[int, int], float]:
    """% of [start, end) that lies before t_ns: the GPU was busy until t_ns, idle after."""
    return lambda a, b: 100 * max(0, min(b, t_ns) - a) / (b - a)


def busy_after(t_ns: int) -> Callable[[int, int], float]:
    return lambda a, b: 100 - busy_before(t_ns)(a, b)


def trailing(t_ns: int, busy_then: bool, lag_s: float = 0.3) -> Callable[[int], float]:
    """``nvmlDeviceGetUtilizationRates`` as NVML does it: still reporting the state before t_ns
    for ``lag_s`` after it, since it averages a trailing window."""
    before, after = (100, 0) if busy_then else (0, 100)
    return lambda now: before if now < t_ns + lag_s * S else after


def util(t_s: float, pct: float, mem_bytes: int = 2_000_000_000) -> list[Sample]:
    t = int(t_s * S)
    return [
        Sample(0, C.NVML_UTILIZATION, t, {C.GPU_PCT: pct, C.MEMORY_PCT: pct / 2}),
        Sample(0, C.NVML_MEMORY, t, {C.USED_BYTES: mem_bytes, C.TOTAL_BYTES: 80 * S}),
        Sample(0, C.NVML_POWER, t, {C.POWER_W: 100 + pct, C.ENERGY_MJ: int(1e6 + t_s * 200_000)}),
        Sample(0, C.NVML_CLOCKS, t, {C.SM_MHZ: 1000 + pct, C.MEM_MHZ: 2600}),
    ]


def test_summary_statistics() -> None:
    samples = [x for i, p in enumerate([0, 50, 100, 100, 100]) for x in util(i * 0.1, p)]
    samples += [
        Sample(
            0,
            C.GPM,
            int(0.15 * S),
            {
                C.TENSOR_UTIL_PCT: 80.0,
                C.SM_UTIL_PCT: 90.0,
                C.FP16_UTIL_PCT: 45.0,
                C.FP32_UTIL_PCT: 20.0,
                C.FP64_UTIL_PCT: 0.5,
            },
        )
    ]
    s = summarize(samples, 0, int(0.4 * S))
    assert s.n_samples == 5 and s.duration_s == pytest.approx(0.4)
    assert s.util_gpu_mean == pytest.approx(70)
    assert s.util_gpu_p50 == 100 and s.util_gpu_max == 100
    assert s.util_gpu_p95 == pytest.approx(100)
    assert s.util_mem_mean == pytest.approx(35)
    assert s.mem_used_max_mb == pytest.approx(2000)
    # Mean power from the energy counter (200 J/s here), not from the power readings, which
    # NVML averages over a trailing second.
    assert s.power_mean_w == pytest.approx(200)
    assert s.energy_j == pytest.approx(0.4 * 200)  # energy counter difference, mJ → J
    assert s.sm_clock_mean_mhz == pytest.approx(1070)
    assert s.tensor_util_mean_pct == 80.0 and s.sm_util_mean_pct == 90.0
    assert (s.fp16_util_mean_pct, s.fp32_util_mean_pct, s.fp64_util_mean_pct) == (45.0, 20.0, 0.5)
    assert s.dram_bw_util_mean_pct is None
    text = s.format()
    assert "mean 70.0 %" in text and "tensor util (GPM)" in text and "FP32 util (GPM)" in text
    d = json.loads(s.to_json())
    assert d["schema_version"] == 1 and d["util_gpu_mean"] == pytest.approx(70)


def test_energy_falls_back_to_power_integral() -> None:
    samples = []
    for i in range(3):
        samples.append(Sample(0, C.NVML_UTILIZATION, i * S, {C.GPU_PCT: 1}))
        samples.append(Sample(0, C.NVML_POWER, i * S, {C.POWER_W: 100.0}))
    assert summarize(samples, 0, 2 * S).energy_j == pytest.approx(200.0)


def test_too_few_samples_says_so() -> None:
    s = summarize(util(0.05, 100), 0, int(0.08 * S))
    assert s.n_samples == 1 and s.too_few_samples
    assert s.util_gpu_mean is None and s.power_mean_w is None
    assert "too few samples" in s.format()
    d = s.to_dict()
    assert d["util_gpu_mean"] is None
    json.dumps(d, allow_nan=False)


def test_to_json_has_no_nan() -> None:
    s = GpuSummary(device=0, n_samples=3, duration_s=1.0, util_gpu_mean=math.nan)
    assert json.loads(s.to_json())["util_gpu_mean"] is None


def test_monitor_region_with_sync_and_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0 % for the first 0.15 s of the region, 100 % after: warmup_s drops the idle start.
    t0 = time.time_ns()
    install(monkeypatch, util_gpu=lambda t: 0 if t - t0 < 0.15 * S else 100)
    driver_samples(monkeypatch, busy_after(t0 + int(0.15 * S)))
    syncs: list[float] = []
    with GpuMonitor(
        device=0, interval_s=0.02, sync_fn=lambda: syncs.append(time.time()), warmup_s=0.2
    ) as mon:
        # long enough for several whole GPM windows after the warm-up (one alone is at the
        # mercy of a busy machine's scheduling)
        time.sleep(0.8)
    assert len(syncs) == 2
    s = mon.summary
    assert s is not None and s.n_samples >= 10
    assert s.util_gpu_mean == 100 and s.util_gpu_max == 100
    assert s.tensor_util_mean_pct is not None and s.n_gpm_samples >= 2  # the fake is a Hopper
    assert 0.59 <= s.duration_s < 0.9


def test_monitor_shorter_than_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    with GpuMonitor(device=0, interval_s=0.5) as mon:
        time.sleep(0.05)
    assert mon.summary is not None and mon.summary.too_few_samples
    assert "too few samples" in mon.summary.format()


def test_monitor_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, init_error=9)
    with pytest.warns(RuntimeWarning), GpuMonitor(device=0, interval_s=0.01) as mon:
        time.sleep(0.05)
    assert mon.summary is not None and mon.summary.n_samples == 0
    assert "NVML unavailable" in mon.summary.format()


def test_gpu_profile_decorator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, util_gpu=42)
    driver_samples(monkeypatch, lambda a, b: 42)

    @gpu_profile(device=0, interval_s=0.02, summary_path=tmp_path / "s.json")
    def bench(x: int) -> int:
        time.sleep(0.15)
        return x * 2

    assert bench.last_summary is None
    assert bench(4) == 8
    assert bench.last_summary.util_gpu_mean == 42
    assert "[test_gpu_profile_decorator.<locals>.bench] GPU 0" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())["util_gpu_mean"] == 42

    @gpu_profile(device=0, interval_s=0.02, print_summary=False)
    def fails() -> None:
        time.sleep(0.05)
        raise ValueError("x")

    with pytest.raises(ValueError):
        fails()
    assert fails.last_summary is not None
    assert capsys.readouterr().out == ""


def test_idle_region_after_busy_work_reads_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    # Busy until the region starts, then idle; the polled rate still says 100 % for 0.3 s.
    t0 = time.time_ns() + int(0.05 * S)
    install(monkeypatch, util_gpu=trailing(t0, busy_then=True))
    asked = driver_samples(monkeypatch, busy_before(t0))
    while time.time_ns() < t0:
        time.sleep(0.001)
    with GpuMonitor(device=0, interval_s=0.02) as mon:
        time.sleep(0.6)
    s = mon.summary
    assert s is not None and s.note is None
    assert s.util_gpu_mean is not None and s.util_gpu_mean < 10
    assert s.util_gpu_max is not None and s.util_gpu_max < 10
    assert s.n_samples >= 20
    # Every window counted lies inside the region; none straddles its start.
    inside = [w for w in mon.util_windows if w.start_ns >= mon._start_ns]
    assert all(w.gpu_pct == 0 for w in inside)
    # The first poll asks for the whole history, later ones only for newer samples.
    assert asked[0] == 0 and asked[-1] > 0
    # The polled readings alone, as before, would have reported the work before the region.
    polled = [x.values[C.GPU_PCT] for x in mon.samples if x.family == C.NVML_UTILIZATION]
    assert max(polled) == 100


def test_busy_region_after_idle_reads_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    t0 = time.time_ns() + int(0.05 * S)
    install(monkeypatch, util_gpu=trailing(t0, busy_then=False))
    driver_samples(monkeypatch, busy_after(t0))
    while time.time_ns() < t0:
        time.sleep(0.001)
    with GpuMonitor(device=0, interval_s=0.02) as mon:
        time.sleep(0.6)
    s = mon.summary
    assert s is not None and s.util_gpu_mean is not None
    assert s.util_gpu_mean > 95 and s.util_gpu_p50 == 100


class StepClock:
    """A clock the test moves by hand: what the sampler, the monitor and the fake NVML read as
    ``time``, so that a test counts ticks it made rather than ones a busy host let through."""

    def __init__(self, start_ns: int) -> None:
        self.now_ns = start_ns

    def time_ns(self) -> int:
        return self.now_ns

    def perf_counter_ns(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.now_ns += int(seconds * S)


def test_without_driver_samples_drops_trailing_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    # No nvmlDeviceGetSamples: the polled readings of the first TRAILING_WINDOW_S are left out.
    import fake_pynvml

    from traceinsight.capture import nvml

    clock = StepClock(time.time_ns())
    for module in (monitor, nvml, fake_pynvml):
        monkeypatch.setattr(module, "time", clock)
    monkeypatch.setattr(nvml.NvmlSampler, "_run", lambda self: None)  # no timer thread: ticks below
    monkeypatch.setattr(monitor, "TRAILING_WINDOW_S", 0.3)
    t0 = clock.time_ns()
    install(monkeypatch, util_gpu=trailing(t0, busy_then=True, lag_s=0.25))
    ticks = 35  # every 20 ms over 0.7 s, 20 of them after the trailing window
    with GpuMonitor(device=0, interval_s=0.02, gpm=False) as mon:
        sampler = mon._sampler
        assert sampler is not None
        for _ in range(ticks):
            sampler._tick()
            clock.sleep(0.02)
    s = mon.summary
    assert s is not None and s.util_gpu_mean == 0 and s.n_samples >= 10
    assert s.note is not None and "first 0.3 s" in s.note and "nvmlDeviceGetSamples" in s.note


def test_driver_samples_on_another_clock_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(monitor, "TRAILING_WINDOW_S", 0.2)
    install(monkeypatch, util_gpu=7)
    # Stamps counted from boot, say, not from the epoch: they cannot be placed in the region.
    driver_samples(monkeypatch, lambda a, b: 100, clock_offset_ns=-time.time_ns() + 5 * S)
    with GpuMonitor(device=0, interval_s=0.02) as mon:
        time.sleep(0.5)
    s = mon.summary
    assert s is not None and s.util_gpu_mean == 7
    assert s.note is not None and "wall clock" in s.note


def test_summarize_keeps_only_windows_inside_the_region() -> None:
    samples = [x for i in range(6) for x in util(i * 0.1, 100)]
    windows = [
        UtilWindow(0, int(-0.1 * S), int(0.1 * S), 80.0),  # straddles the start
        UtilWindow(0, int(0.1 * S), int(0.2 * S), 0.0),
        UtilWindow(0, int(0.2 * S), int(0.4 * S), 30.0),  # twice as long: weighs twice
        UtilWindow(1, int(0.2 * S), int(0.3 * S), 100.0),  # another device
        UtilWindow(0, int(0.4 * S), int(0.6 * S), 100.0),  # ends after the region
    ]
    s = summarize(samples, 0, int(0.5 * S), device=0, util_windows=windows)
    assert s.n_samples == 2
    assert s.util_gpu_mean == pytest.approx(20.0)  # (0 * 0.1 + 30 * 0.2) / 0.3
    assert s.util_gpu_max == 30.0


def test_summarize_drops_gpm_windows_reaching_before_the_region() -> None:
    gpm = [Sample(0, C.GPM, int(t * S), {C.SM_UTIL_PCT: v}) for t, v in [(0.05, 90.0), (0.3, 10.0)]]
    samples = [x for i in range(5) for x in util(i * 0.1, 0)] + gpm
    s = summarize(samples, 0, int(0.5 * S), gpm_window_ns=int(0.1 * S))
    # 0.05 s is the middle of a window that began before the region (and GPM trails).
    assert s.n_gpm_samples == 1 and s.sm_util_mean_pct == 10.0
    assert summarize(samples, 0, int(0.5 * S)).n_gpm_samples == 2
