"""GpuSummary arithmetic, and GpuMonitor / gpu_profile over a fake pynvml (no torch needed)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from fake_pynvml import install

from traceinsight.capture import GpuMonitor, GpuSummary, gpu_profile, summarize
from traceinsight.capture import counters as C
from traceinsight.capture.nvml import Sample

S = 1_000_000_000


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
            {C.TENSOR_UTIL_PCT: 80.0, C.SM_UTIL_PCT: 90.0, C.FP16_UTIL_PCT: 45.0, C.FP32_UTIL_PCT: 20.0, C.FP64_UTIL_PCT: 0.5},
        )
    ]
    s = summarize(samples, 0, int(0.4 * S))
    assert s.n_samples == 5 and s.duration_s == pytest.approx(0.4)
    assert s.util_gpu_mean == pytest.approx(70)
    assert s.util_gpu_p50 == 100 and s.util_gpu_max == 100
    assert s.util_gpu_p95 == pytest.approx(100)
    assert s.util_mem_mean == pytest.approx(35)
    assert s.mem_used_max_mb == pytest.approx(2000)
    assert s.power_mean_w == pytest.approx(170)
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
    syncs: list[float] = []
    with GpuMonitor(
        device=0, interval_s=0.02, sync_fn=lambda: syncs.append(time.time()), warmup_s=0.2
    ) as mon:
        time.sleep(0.5)
    assert len(syncs) == 2
    s = mon.summary
    assert s is not None and s.n_samples >= 10
    assert s.util_gpu_mean == 100 and s.util_gpu_max == 100
    assert s.tensor_util_mean_pct is not None  # the fake is a Hopper
    assert 0.29 <= s.duration_s < 0.6


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
