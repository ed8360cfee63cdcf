"""``GpuMonitor`` / ``gpu_profile``: NVML counters over a region, summarised as ``GpuSummary``.

NVML's utilization, memory-activity and power readings average a trailing window (up to ~1 s):
read early in a region they describe the work before it. So the monitor takes GPU utilization
from NVML's timestamped samples (each covers a known span) lying inside the region, mean power
from the energy counter, and other trailing readings only once their window is in the region.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from traceinsight.capture import counters as C
from traceinsight.capture import nvml as N
from traceinsight.capture.distributed import dist_rank
from traceinsight.capture.merge import write_bytes_atomic
from traceinsight.capture.nvml import OK, NvmlSampler, Sample, UtilWindow

SCHEMA_VERSION = 1
MIN_SAMPLES = 2
# How far back NVML's trailing averages (utilization rates, memory activity, power) reach.
TRAILING_WINDOW_S = 1.0
# GPM values trail their stamps by up to about one window (benchmarks/gpm_lag.py).
GPM_LAG_WINDOWS = 1.0


def _percentile(sorted_vals: list[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default), without numpy.
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = (len(sorted_vals) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


@dataclass(frozen=True)
class GpuSummary:
    """NVML/GPM counters of one GPU over a region. Fields are None where no value exists."""

    device: int | None
    n_samples: int
    duration_s: float
    util_gpu_mean: float | None = None
    util_gpu_p50: float | None = None
    util_gpu_p95: float | None = None
    util_gpu_max: float | None = None
    util_mem_mean: float | None = None
    mem_used_max_mb: float | None = None
    power_mean_w: float | None = None
    energy_j: float | None = None
    sm_clock_mean_mhz: float | None = None
    sm_util_mean_pct: float | None = None
    sm_occupancy_mean_pct: float | None = None
    tensor_util_mean_pct: float | None = None
    dram_bw_util_mean_pct: float | None = None
    fp16_util_mean_pct: float | None = None
    fp32_util_mean_pct: float | None = None
    fp64_util_mean_pct: float | None = None
    n_gpm_samples: int = 0
    note: str | None = None

    @property
    def too_few_samples(self) -> bool:
        return self.n_samples < MIN_SAMPLES

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for k, v in asdict(self).items():
            out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    def format(self) -> str:
        head = f"GPU {self.device}" if self.device is not None else "GPU"
        if self.too_few_samples:
            why = self.note or (
                f"{self.n_samples} sample(s) in {self.duration_s:.3f} s; need at least "
                f"{MIN_SAMPLES} (region shorter than the sampling interval?)"
            )
            return f"{head}: too few samples for a summary: {why}"
        lines = [f"{head}: {self.n_samples} samples over {self.duration_s:.2f} s"]

        def row(label: str, value: str | None) -> None:
            if value is not None:
                lines.append(f"  {label:<22} {value}")

        def pct(v: float | None) -> str | None:
            return None if v is None else f"{v:5.1f} %"

        if self.util_gpu_mean is not None:
            row(
                "GPU util (any kernel)",
                f"mean {self.util_gpu_mean:.1f} %  p50 {self.util_gpu_p50:.1f}  "
                f"p95 {self.util_gpu_p95:.1f}  max {self.util_gpu_max:.1f}",
            )
        row("memory util", pct(self.util_mem_mean))
        row(
            "memory used max",
            None if self.mem_used_max_mb is None else f"{self.mem_used_max_mb:.0f} MB",
        )
        row("power mean", None if self.power_mean_w is None else f"{self.power_mean_w:.1f} W")
        row("energy", None if self.energy_j is None else f"{self.energy_j:.1f} J")
        row(
            "SM clock mean",
            None if self.sm_clock_mean_mhz is None else f"{self.sm_clock_mean_mhz:.0f} MHz",
        )
        row("SM util (GPM)", pct(self.sm_util_mean_pct))
        row("SM occupancy (GPM)", pct(self.sm_occupancy_mean_pct))
        row("tensor util (GPM)", pct(self.tensor_util_mean_pct))
        row("DRAM BW util (GPM)", pct(self.dram_bw_util_mean_pct))
        row("FP16 util (GPM)", pct(self.fp16_util_mean_pct))
        row("FP32 util (GPM)", pct(self.fp32_util_mean_pct))
        row("FP64 util (GPM)", pct(self.fp64_util_mean_pct))
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def _series(samples: Sequence[Sample], family: str, key: str) -> list[tuple[int, float]]:
    return [
        (s.t_ns, float(s.values[key])) for s in samples if s.family == family and key in s.values
    ]


def _mean(pairs: list[tuple[int, float]]) -> float | None:
    return statistics.fmean(v for _, v in pairs) if pairs else None


def _energy_j(samples: Sequence[Sample]) -> float | None:
    energy = _series(samples, C.NVML_POWER, C.ENERGY_MJ)
    if len(energy) >= 2 and energy[-1][1] >= energy[0][1]:
        return (energy[-1][1] - energy[0][1]) / 1000.0
    power = _series(samples, C.NVML_POWER, C.POWER_W)
    if len(power) < 2:
        return None
    # Trapezoid of power over time where the board has no energy counter.
    return sum((t1 - t0) / 1e9 * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(power))


def _util_from_windows(
    windows: Sequence[UtilWindow], device: int | None, start_ns: int, end_ns: int
) -> tuple[list[tuple[int, float]], float | None]:
    """Windows lying inside the region as (end_ns, pct), and their time-weighted mean."""
    inside = [
        w for w in windows if w.device == device and w.start_ns >= start_ns and w.end_ns <= end_ns
    ]
    inside.sort(key=lambda w: w.end_ns)
    total_ns = sum(w.end_ns - w.start_ns for w in inside)
    mean = (
        sum(w.gpu_pct * (w.end_ns - w.start_ns) for w in inside) / total_ns
        if total_ns > 0
        else None
    )
    return [(w.end_ns, w.gpu_pct) for w in inside], mean


def _power_from_energy(samples: Sequence[Sample]) -> float | None:
    energy = _series(samples, C.NVML_POWER, C.ENERGY_MJ)
    if len(energy) < 2 or energy[-1][0] <= energy[0][0] or energy[-1][1] < energy[0][1]:
        return None
    return (energy[-1][1] - energy[0][1]) / 1000.0 / ((energy[-1][0] - energy[0][0]) / 1e9)


def summarize(
    samples: Sequence[Sample],
    start_ns: int,
    end_ns: int,
    *,
    device: int | None = None,
    note: str | None = None,
    util_windows: Sequence[UtilWindow] | None = None,
    trailing_ns: int = 0,
    gpm_window_ns: int = 0,
) -> GpuSummary:
    """Summarise one device's samples stamped within [start_ns, end_ns].

    ``util_windows`` (NVML's timestamped utilization samples), when given, supply the GPU
    utilization: only windows lying wholly inside the region count. Readings that average a
    trailing window are kept only when stamped ``trailing_ns`` or more after ``start_ns``, and
    GPM samples only when their window (``gpm_window_ns``, plus the lag of GPM values) starts
    inside the region and ends by its end. Defaults keep every reading stamped in the region.
    """
    inside = sorted((s for s in samples if start_ns <= s.t_ns <= end_ns), key=lambda s: s.t_ns)
    if device is None and inside:
        device = inside[0].device
    inside = [s for s in inside if s.device == device]
    settled = [s for s in inside if s.t_ns >= start_ns + trailing_ns]
    duration_s = max(0.0, (end_ns - start_ns) / 1e9)
    util_mean: float | None = None
    if util_windows is not None:
        util, util_mean = _util_from_windows(util_windows, device, start_ns, end_ns)
    else:
        util = _series(settled, C.NVML_UTILIZATION, C.GPU_PCT)
    n = len(util) if util else len({s.t_ns for s in settled if s.family != C.GPM})
    if n < MIN_SAMPLES:
        return GpuSummary(device=device, n_samples=n, duration_s=duration_s, note=note)
    vals = sorted(v for _, v in util)
    if util_mean is None and vals:
        util_mean = statistics.fmean(vals)
    mem = _series(inside, C.NVML_MEMORY, C.USED_BYTES)
    lead_ns = int(gpm_window_ns * (0.5 + GPM_LAG_WINDOWS)) if gpm_window_ns else 0
    gpm = [
        s
        for s in inside
        if s.family == C.GPM
        and s.t_ns - lead_ns >= start_ns
        and s.t_ns + gpm_window_ns // 2 <= end_ns
    ]
    power = _power_from_energy(inside)
    return GpuSummary(
        device=device,
        n_samples=n,
        duration_s=duration_s,
        util_gpu_mean=util_mean,
        util_gpu_p50=_percentile(vals, 0.5) if vals else None,
        util_gpu_p95=_percentile(vals, 0.95) if vals else None,
        util_gpu_max=vals[-1] if vals else None,
        util_mem_mean=_mean(_series(settled, C.NVML_UTILIZATION, C.MEMORY_PCT)),
        mem_used_max_mb=max(v for _, v in mem) / 1e6 if mem else None,
        power_mean_w=power
        if power is not None
        else _mean(_series(settled, C.NVML_POWER, C.POWER_W)),
        energy_j=_energy_j(inside),
        sm_clock_mean_mhz=_mean(_series(inside, C.NVML_CLOCKS, C.SM_MHZ)),
        sm_util_mean_pct=_mean(_series(gpm, C.GPM, C.SM_UTIL_PCT)),
        sm_occupancy_mean_pct=_mean(_series(gpm, C.GPM, C.SM_OCCUPANCY_PCT)),
        tensor_util_mean_pct=_mean(_series(gpm, C.GPM, C.TENSOR_UTIL_PCT)),
        dram_bw_util_mean_pct=_mean(_series(gpm, C.GPM, C.DRAM_BW_UTIL_PCT)),
        fp16_util_mean_pct=_mean(_series(gpm, C.GPM, C.FP16_UTIL_PCT)),
        fp32_util_mean_pct=_mean(_series(gpm, C.GPM, C.FP32_UTIL_PCT)),
        fp64_util_mean_pct=_mean(_series(gpm, C.GPM, C.FP64_UTIL_PCT)),
        n_gpm_samples=len(gpm),
        note=note,
    )


def summary_fields() -> list[str]:
    return [f.name for f in fields(GpuSummary)]


def _default_device() -> int:
    try:
        import torch

        if torch.cuda.is_available():
            return int(torch.cuda.current_device())
    except ImportError:
        pass
    return 0


def _ranked(path: Path) -> Path:
    rank = dist_rank()
    if rank is None:
        return path
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


class RegionSampler(NvmlSampler):
    """An :class:`NvmlSampler` that also collects NVML's timestamped utilization samples.

    ``nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES)`` returns the driver's recent samples,
    each stamped (CPU time, µs) at the end of the span it covers, which starts at the previous
    sample. Polled every tick and once more when stopping, they become :class:`UtilWindow`\\ s.
    ``windows_status`` is ``"ok"`` or why there are none.
    """

    def __init__(
        self, devices: Sequence[int], *, interval_s: float = 0.1, gpm: bool = True
    ) -> None:
        super().__init__(devices, interval_s=interval_s, gpm=gpm)
        self.windows_status = "not started"
        self._windows: list[UtilWindow] = []
        self._last_us: dict[int, int] = {}

    def start(self) -> RegionSampler:
        try:
            import pynvml

            has_samples = hasattr(pynvml, "nvmlDeviceGetSamples")
        except ImportError:
            has_samples = False
        # Set before the sampling thread starts, so that its first tick already polls.
        self.windows_status = OK if has_samples else "no nvmlDeviceGetSamples"
        super().start()
        if self.status != OK:
            self.windows_status = self.status
        return self

    def util_windows(self) -> list[UtilWindow]:
        with self._lock:
            return list(self._windows)

    def _tick(self) -> None:
        super()._tick()
        self._poll_windows()

    def _close(self) -> None:
        if self.status == OK and self._thread is None:
            self._poll_windows()  # the samples up to now cover the end of the region
        super()._close()

    def _poll_windows(self) -> None:
        if self.windows_status != OK:
            return
        found = [w for dev in self._devs for w in self._read_windows(dev)]
        with self._lock:
            self._windows.extend(found)

    def _read_windows(self, dev: N._Device) -> list[UtilWindow]:
        nvml = self._nvml
        index = dev.info.index
        last_us = self._last_us.get(index, 0)
        kind = getattr(nvml, "NVML_GPU_UTILIZATION_SAMPLES", 1)
        try:
            value_type, raw = nvml.nvmlDeviceGetSamples(dev.handle, kind, last_us)
        except Exception as exc:
            # NVML_ERROR_NOT_FOUND means no sample newer than last_us: try again next tick.
            if N._is_not_supported(nvml, exc):
                self.windows_status = f"NVML utilization samples unsupported: {exc}"
            return []
        points = sorted(
            (ts, v)
            for s in raw
            if (ts := int(s.timeStamp)) > last_us
            and (v := N.sample_value(s.sampleValue, value_type)) is not None
        )
        if not points:
            return []
        if not N.sample_clock_ok(points[-1][0]):
            self.windows_status = (
                f"NVML sample timestamps ({points[-1][0]} µs) are not on the wall clock"
            )
            return []
        out = []
        # The first sample seen has no predecessor, so its span is unknown: it opens the series.
        prev_us = last_us
        for ts_us, value in points:
            if prev_us > 0:
                out.append(UtilWindow(index, prev_us * 1000, ts_us * 1000, value))
            prev_us = ts_us
        self._last_us[index] = prev_us
        return out


class GpuMonitor:
    """Samples one GPU over a ``with`` block and leaves a :class:`GpuSummary` in ``.summary``.

    ``sync_fn`` (e.g. ``torch.cuda.synchronize``) runs on entry and exit so that GPU work
    queued before or inside the block falls on the right side of the boundaries; the first
    ``warmup_s`` of the block are left out of the summary. With ``summary_path`` the summary is
    also written as JSON (one file per rank under torch.distributed).
    """

    def __init__(
        self,
        device: int | None = None,
        *,
        interval_s: float = 0.1,
        sync_fn: Callable[[], object] | None = None,
        warmup_s: float = 0.0,
        gpm: bool = True,
        summary_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if warmup_s < 0:
            raise ValueError("warmup_s must be >= 0")
        self.device = device
        self.interval_s = interval_s
        self.sync_fn = sync_fn
        self.warmup_s = warmup_s
        self.gpm = gpm
        self.summary_path = None if summary_path is None else Path(summary_path)
        self.summary: GpuSummary | None = None
        self.samples: list[Sample] = []
        self.util_windows: list[UtilWindow] = []
        self.summary_written: Path | None = None
        self._sampler: RegionSampler | None = None
        self._start_ns = 0

    def __enter__(self) -> GpuMonitor:
        if self.sync_fn is not None:
            self.sync_fn()
        device = _default_device() if self.device is None else self.device
        self.device = device
        self.summary = None
        self._sampler = RegionSampler([device], interval_s=self.interval_s, gpm=self.gpm)
        # Starting the sampler can take a while (NVML init, torch import for the device uuid);
        # the region begins when the user's code does, after it.
        self._sampler.start()
        self._start_ns = time.time_ns()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.sync_fn is not None and exc is None:
                self.sync_fn()
        finally:
            end_ns = time.time_ns()
            sampler = self._sampler
            assert sampler is not None
            sampler.stop()
            self.samples = sampler.samples()
            self.util_windows = sampler.util_windows()
            windows: list[UtilWindow] | None = self.util_windows
            if sampler.status != OK:
                note: str | None = f"NVML unavailable: {sampler.status}"
            elif sampler.windows_status != OK:
                note = (
                    f"GPU util from polled readings ({sampler.windows_status}); those of the "
                    f"first {TRAILING_WINDOW_S:g} s, which average time before the region, "
                    "are left out"
                )
                windows = None
            else:
                note = None
            start = self._start_ns + int(self.warmup_s * 1e9)
            self.summary = summarize(
                self.samples,
                start,
                end_ns,
                device=self.device,
                note=note,
                util_windows=windows,
                trailing_ns=int(TRAILING_WINDOW_S * 1e9),
                gpm_window_ns=int(sampler.gpm_window_s * 1e9),
            )
            if self.summary_path is not None:
                target = _ranked(self.summary_path)
                write_bytes_atomic((self.summary.to_json() + "\n").encode(), target, gz=False)
                self.summary_written = target


P = ParamSpec("P")
R = TypeVar("R")


def gpu_profile(
    func: Callable[P, R] | None = None,
    *,
    device: int | None = None,
    interval_s: float = 0.1,
    sync_fn: Callable[[], object] | None = None,
    warmup_s: float = 0.0,
    gpm: bool = True,
    print_summary: bool = True,
    summary_path: str | os.PathLike[str] | None = None,
) -> Any:
    """Decorator: run the function under a :class:`GpuMonitor`.

    The last summary is kept as ``wrapped.last_summary``; it is printed unless
    ``print_summary=False``. Usable bare (``@gpu_profile``) or with arguments.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            mon = GpuMonitor(
                device,
                interval_s=interval_s,
                sync_fn=sync_fn,
                warmup_s=warmup_s,
                gpm=gpm,
                summary_path=summary_path,
            )
            try:
                with mon:
                    return fn(*args, **kwargs)
            finally:
                wrapper.last_summary = mon.summary  # type: ignore[attr-defined]
                if print_summary and mon.summary is not None:
                    print(f"[{fn.__qualname__}] {mon.summary.format()}")

        wrapper.last_summary = None  # type: ignore[attr-defined]
        return wrapper

    if func is not None:
        return decorate(func)
    return decorate
