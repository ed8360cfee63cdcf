"""The NVML sampler against a fake pynvml module: what it reads, when, and how it stamps it."""

from __future__ import annotations

import itertools
import sys
import time
import warnings
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from fake_pynvml import NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NVMLError, install

from traceinsight.capture import counters as C
from traceinsight.capture.nvml import NvmlSampler, nvml_handle


def run_sampler(duration_s: float, **kwargs: object) -> NvmlSampler:
    s = NvmlSampler([0], **kwargs)  # type: ignore[arg-type]
    s.start()
    time.sleep(duration_s)
    s.stop()
    return s


def test_samples_every_family_with_units_in_series_names(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, util_gpu=73)
    s = run_sampler(0.35, interval_s=0.05)
    assert s.status == "ok" and s.gpm_status == "ok"
    fams = {x.family for x in s.samples()}
    assert fams == set(C.FAMILIES)
    for x in s.samples():
        assert set(x.values) <= set(C.FAMILIES[x.family])
        assert x.device == 0
    util = [x for x in s.samples() if x.family == C.NVML_UTILIZATION]
    assert all(u.values[C.GPU_PCT] == 73 for u in util)
    power = next(x for x in s.samples() if x.family == C.NVML_POWER)
    assert power.values[C.POWER_W] == pytest.approx(300.0)
    throttle = next(x for x in s.samples() if x.family == C.NVML_THROTTLE)
    assert throttle.values[C.REASONS_MASK] == 0x44
    assert throttle.values[C.SW_POWER_CAP] == 1 and throttle.values[C.HW_THERMAL] == 1
    assert throttle.values[C.HW_SLOWDOWN] == 0


class FakeClock:
    """Drives the sampler's loop without wall-clock time: ``perf_counter_ns`` reads it, a tick
    advances it by its cost, and the stop event's ``wait(timeout)`` advances it by the timeout
    (returning True, "stopped", after ``ticks`` waits)."""

    def __init__(self, ticks: int, tick_cost_ms: Callable[[int], float]) -> None:
        self.now_ns = 1_000_000_000
        self.ticks, self.cost = ticks, tick_cost_ms
        self.tick_starts_ns: list[int] = []
        self.waits = 0

    def perf_counter_ns(self) -> int:
        return self.now_ns

    def tick(self) -> None:
        self.tick_starts_ns.append(self.now_ns)
        self.now_ns += round(self.cost(len(self.tick_starts_ns) - 1) * 1e6)

    def wait(self, timeout_s: float) -> bool:
        assert timeout_s >= 0, "the loop never waits a negative time"
        self.now_ns += round(timeout_s * 1e9)
        self.waits += 1
        return self.waits >= self.ticks


def drive(monkeypatch: pytest.MonkeyPatch, interval_s: float, clock: FakeClock) -> list[float]:
    """Run the sampler's loop on ``clock``; the ticks' offsets in ms from the first."""
    from traceinsight.capture import nvml as nvml_module

    s = NvmlSampler([0], interval_s=interval_s, gpm=False)
    monkeypatch.setattr(nvml_module, "time", SimpleNamespace(perf_counter_ns=clock.perf_counter_ns, sleep=lambda _s: None))
    monkeypatch.setattr(s, "_tick", clock.tick)
    monkeypatch.setattr(s, "_stop", SimpleNamespace(wait=clock.wait))
    s._run()
    return [(t - clock.tick_starts_ns[0]) / 1e6 for t in clock.tick_starts_ns]


def test_interval_is_drift_corrected(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each tick costs 12 ms of NVML calls. Corrected, ticks stay on the 50 ms grid laid from the
    # first one; uncorrected (sleeping the interval after each tick) the 10th would be 108 ms late.
    clock = FakeClock(ticks=10, tick_cost_ms=lambda _i: 12.0)
    offsets = drive(monkeypatch, 0.05, clock)
    assert offsets == [50.0 * i for i in range(10)]


def test_a_slow_tick_skips_missed_ticks_instead_of_bursting(monkeypatch: pytest.MonkeyPatch) -> None:
    # The third tick takes 130 ms (a busy host): the ticks due at 150 and 200 ms, which it
    # overran, are skipped, and sampling resumes on the same 50 ms grid; no two ticks are
    # closer than the interval.
    clock = FakeClock(ticks=6, tick_cost_ms=lambda i: 130.0 if i == 2 else 5.0)
    offsets = drive(monkeypatch, 0.05, clock)
    assert offsets == [0.0, 50.0, 100.0, 250.0, 300.0, 350.0]
    assert all(b - a >= 50.0 for a, b in itertools.pairwise(offsets))


def test_gpm_samples_are_at_least_100ms_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch)
    s = run_sampler(0.75, interval_s=0.03)
    gets = fake.calls_named("gpm_sample")
    assert len(gets) >= 5
    gaps_s = [(b.start_ns - a.start_ns) / 1e9 for a, b in itertools.pairwise(gets)]
    assert min(gaps_s) >= 0.1
    # No window was so short that GPM returned NaN: every GPM sample has all its series.
    gpm = [x for x in s.samples() if x.family == C.GPM]
    assert len(gpm) == len(gets) - 1
    assert all(set(x.values) == set(C.FAMILIES[C.GPM]) for x in gpm)
    pcie = next(x for x in gpm)
    assert pcie.values[C.PCIE_RX_BYTES_PER_S] == pcie.values[C.SM_UTIL_PCT] * 1024 * 1024


def test_counter_stamp_lies_inside_the_span_it_was_read_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake takes 4 ms per call and returns a distinct value per call, so each sample can be
    # matched to the call that produced it.
    counter = iter(range(1000))
    fake = install(monkeypatch, call_latency_s=0.004, util_gpu=lambda _t: next(counter))
    s = run_sampler(0.5, interval_s=0.1)
    calls = {c.result.gpu: c for c in fake.calls_named("util")}
    util = [x for x in s.samples() if x.family == C.NVML_UTILIZATION]
    assert util
    for x in util:
        call = calls[x.values[C.GPU_PCT]]
        assert call.start_ns <= x.t_ns <= call.end_ns
    # A GPM value is the average between two samples: its stamp lies between them.
    gets = {c.result.serial: c for c in fake.calls_named("gpm_sample")}
    gpm = [x for x in s.samples() if x.family == C.GPM]
    assert gpm
    for x in gpm:
        first = gets[int(x.values[C.SM_UTIL_PCT])]
        second = gets[int(x.values[C.SM_UTIL_PCT]) + 1]
        assert first.end_ns <= x.t_ns <= second.start_ns


def test_never_calls_pcie_throughput(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch)
    run_sampler(0.25, interval_s=0.05)
    assert fake.calls_named("util")
    assert not fake.calls_named("pcie_throughput")


def test_pre_hopper_has_no_gpm_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, hopper=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = run_sampler(0.25, interval_s=0.05)
    assert s.status == "ok"
    assert "Hopper" in s.gpm_status
    assert not [x for x in s.samples() if x.family == C.GPM]
    assert any("GPM" in str(m.message) for m in w)


def test_unsupported_call_is_dropped_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = install(monkeypatch)
    mod = sys.modules["pynvml"]

    def no_energy(h: int) -> int:
        fake._call("energy", lambda: None)
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)

    monkeypatch.setattr(mod, "nvmlDeviceGetTotalEnergyConsumption", no_energy)
    s = run_sampler(0.3, interval_s=0.05, gpm=False)
    power = [x for x in s.samples() if x.family == C.NVML_POWER]
    assert power and all(C.ENERGY_MJ not in x.values for x in power)
    assert all(C.POWER_W in x.values for x in power)
    assert len(fake.calls_named("energy")) == 1


def test_no_pynvml_means_no_samples_and_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a = run_sampler(0.05)
        b = run_sampler(0.05)
    assert "not installed" in a.status and a.status == b.status
    assert a.samples() == [] and b.samples() == []
    assert len([m for m in w if "unavailable" in str(m.message)]) == 1


def test_nvml_init_error_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.warns(RuntimeWarning, match="NVML init failed"):
        s = run_sampler(0.05)
    assert s.status.startswith("NVML init failed")
    assert s.gpm_status == s.status
    assert s.samples() == []


def test_handle_respects_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, n_devices=4)
    mod = sys.modules["pynvml"]
    assert nvml_handle(mod, 1) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,2")
    assert nvml_handle(mod, 0) == 3
    assert nvml_handle(mod, 1) == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-2")
    assert nvml_handle(mod, 0) == 2
    with pytest.raises(LookupError):
        nvml_handle(mod, 1)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        NvmlSampler([0], interval_s=0)
