"""NVML (and GPM) sampling on one daemon thread.

Every sample is stamped with ``time.time_ns()`` at the midpoint of the NVML calls that read
it, so a counter lands inside the span in which it was taken. GPM metrics are averages over
the window between two GPM samples; they are stamped at the middle of that window.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceinsight.capture import counters as C
from traceinsight.capture.notices import report_unavailable

OK = "ok"

@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    uuid: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid}


@dataclass(frozen=True)
class Sample:
    """One counter reading: a family's series for one CUDA device at one instant."""

    device: int
    family: str
    t_ns: int
    values: dict[str, float | int]


@dataclass(frozen=True)
class UtilWindow:
    """One of NVML's own utilization samples: % of (start_ns, end_ns] in which a kernel ran."""

    device: int
    start_ns: int
    end_ns: int
    gpu_pct: float


# The field of the nvmlValue_t union that holds a value, indexed by nvmlValueType_t.
_VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")


def sample_value(value: Any, value_type: int) -> float | None:
    """The number in an ``nvmlSample_t.sampleValue`` of the given ``nvmlValueType_t``."""
    field_name = _VALUE_FIELDS[value_type] if 0 <= value_type < len(_VALUE_FIELDS) else "uiVal"
    num = _number(getattr(value, field_name, None))
    return None if num is None else float(num)


def sample_clock_ok(newest_us: int) -> bool:
    """Whether NVML's sample stamps (CPU time, µs) are on time.time_ns()'s clock: the newest
    one must lie within the last hour and not in the future (NVML keeps a short history)."""
    now_ns = time.time_ns()
    return now_ns - 3600 * 10**9 <= newest_us * 1000 <= now_ns + 5 * 10**9


def default_devices() -> list[int]:
    """CUDA devices this process uses: its own device under torch.distributed, else all visible."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    try:
        import torch.distributed as dist
    except ImportError:  # a torch built without distributed support: every visible device
        return list(range(torch.cuda.device_count()))
    if dist.is_available() and dist.is_initialized():
        return [torch.cuda.current_device()]
    return list(range(torch.cuda.device_count()))


def _torch_uuid(index: int) -> str | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(index).uuid)
    except Exception:  # no torch, or a CUDA runtime that cannot answer: the caller falls back to the NVML index
        return None
    if not uuid:
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_handle(nvml: Any, index: int) -> Any:
    """NVML handle of CUDA device ``index``, which is not NVML's index under CUDA_VISIBLE_DEVICES."""
    uuid = _torch_uuid(index)
    if uuid is not None:
        with contextlib.suppress(Exception):
            return nvml.nvmlDeviceGetHandleByUUID(uuid)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return nvml.nvmlDeviceGetHandleByIndex(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise LookupError(f"CUDA device {index} is not in CUDA_VISIBLE_DEVICES={visible}")
    entry = entries[index]
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


Reader = Callable[[Any, Any], dict[str, Any]]


def _read_utilization(nvml: Any, h: Any) -> dict[str, Any]:
    u = nvml.nvmlDeviceGetUtilizationRates(h)
    return {C.GPU_PCT: u.gpu, C.MEMORY_PCT: u.memory}


def _read_memory(nvml: Any, h: Any) -> dict[str, Any]:
    m = nvml.nvmlDeviceGetMemoryInfo(h)
    return {C.USED_BYTES: m.used, C.TOTAL_BYTES: m.total}


def _read_power(nvml: Any, h: Any) -> dict[str, Any]:
    return {C.POWER_W: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0}


def _read_energy(nvml: Any, h: Any) -> dict[str, Any]:
    return {C.ENERGY_MJ: int(nvml.nvmlDeviceGetTotalEnergyConsumption(h))}


def _read_sm_clock(nvml: Any, h: Any) -> dict[str, Any]:
    return {C.SM_MHZ: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)}


def _read_mem_clock(nvml: Any, h: Any) -> dict[str, Any]:
    return {C.MEM_MHZ: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM)}


def _read_thermal(nvml: Any, h: Any) -> dict[str, Any]:
    return {C.TEMP_C: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)}


def _read_throttle(nvml: Any, h: Any) -> dict[str, Any]:
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is None:
        fn = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(fn(h))
    out: dict[str, Any] = {C.REASONS_MASK: mask}
    for series, bit in C.THROTTLE_FLAGS.items():
        out[series] = 1 if mask & bit else 0
    return out


# Each family is read by a few cheap calls (< 0.2 ms each). Never add
# nvmlDeviceGetPcieThroughput here: it blocks for ~20 ms.
FAMILY_READERS: dict[str, tuple[Reader, ...]] = {
    C.NVML_UTILIZATION: (_read_utilization,),
    C.NVML_MEMORY: (_read_memory,),
    C.NVML_POWER: (_read_power, _read_energy),
    C.NVML_CLOCKS: (_read_sm_clock, _read_mem_clock),
    C.NVML_THERMAL: (_read_thermal,),
    C.NVML_THROTTLE: (_read_throttle,),
}


@dataclass
class _GpmState:
    prev: Any
    spare: Any
    prev_t_ns: int = 0
    prev_perf_ns: int = 0
    have_prev: bool = False


@dataclass
class _Device:
    info: DeviceInfo
    handle: Any
    gpm: _GpmState | None = None
    # Readers that failed as unsupported are not called again: a failing call still costs time.
    dead: set[Reader] = field(default_factory=set)


class NvmlSampler:
    """Samples NVML counters of some CUDA devices every ``interval_s`` on a daemon thread.

    ``status`` and ``gpm_status`` are ``"ok"`` or the reason there are no samples.
    """

    def __init__(
        self,
        devices: Sequence[int] | None = None,
        *,
        interval_s: float = 0.1,
        gpm: bool = True,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.interval_s = float(interval_s)
        self.gpm_window_s = max(C.GPM_MIN_WINDOW_S, self.interval_s)
        self._requested = None if devices is None else list(devices)
        self._want_gpm = gpm
        self.status = "not started"
        self.gpm_status = "not started"
        self.devices: list[DeviceInfo] = []
        self.n_ticks = 0
        self._nvml: Any = None
        self._devs: list[_Device] = []
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.start_ns = 0
        self.stop_ns = 0

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> NvmlSampler:
        self.start_ns = time.time_ns()
        self.status = self._open()
        if self.status != OK:
            self.gpm_status = self.status
            report_unavailable("GPU counters", self.status)
            return self
        if self.gpm_status not in (OK, "disabled"):
            report_unavailable("GPM metrics", self.gpm_status)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="traceinsight-nvml", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stop_ns = time.time_ns()
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._close()

    def __enter__(self) -> NvmlSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def samples(self, start_ns: int | None = None, end_ns: int | None = None) -> list[Sample]:
        """A copy of the samples so far, optionally only those stamped in [start_ns, end_ns]."""
        with self._lock:
            out = list(self._samples)
        if start_ns is not None:
            out = [s for s in out if s.t_ns >= start_ns]
        if end_ns is not None:
            out = [s for s in out if s.t_ns <= end_ns]
        return out

    def meta(self) -> dict[str, Any]:
        return {
            "nvml": self.status,
            "gpm": self.gpm_status,
            "interval_s": self.interval_s,
            "devices": [d.to_dict() for d in self.devices],
        }

    # ---- NVML setup ------------------------------------------------------------------------

    def _open(self) -> str:
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py (pynvml) is not installed"
        indices = default_devices() if self._requested is None else self._requested
        if not indices:
            return "no CUDA device in use"
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return f"NVML init failed: {exc}"
        self._nvml = pynvml
        try:
            for index in indices:
                handle = nvml_handle(pynvml, index)
                info = DeviceInfo(
                    index=index,
                    name=_safe_text(pynvml.nvmlDeviceGetName, handle),
                    uuid=_safe_text(pynvml.nvmlDeviceGetUUID, handle),
                )
                self._devs.append(_Device(info=info, handle=handle))
        except Exception as exc:
            self._close()
            return f"no NVML handle for CUDA device: {exc}"
        self.devices = [d.info for d in self._devs]
        self.gpm_status = self._open_gpm() if self._want_gpm else "disabled"
        return OK

    def _open_gpm(self) -> str:
        nvml = self._nvml
        if not hasattr(nvml, "nvmlGpmSampleAlloc"):
            return "this nvidia-ml-py has no GPM API"
        reasons = []
        for dev in self._devs:
            try:
                support = nvml.nvmlGpmQueryDeviceSupport(dev.handle)
                if not support.isSupportedDevice:
                    reasons.append(f"{dev.info.name} does not support GPM (needs Hopper or later)")
                    continue
                dev.gpm = _GpmState(prev=nvml.nvmlGpmSampleAlloc(), spare=nvml.nvmlGpmSampleAlloc())
            except Exception as exc:
                reasons.append(f"GPM unavailable on {dev.info.name}: {exc}")
        if any(d.gpm is not None for d in self._devs):
            return OK
        return "; ".join(reasons) or "GPM unavailable"

    def _close(self) -> None:
        nvml = self._nvml
        if nvml is None:
            return
        for dev in self._devs:
            if dev.gpm is not None:
                for s in (dev.gpm.prev, dev.gpm.spare):
                    with contextlib.suppress(Exception):
                        nvml.nvmlGpmSampleFree(s)
                dev.gpm = None
        self._devs = []
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
        self._nvml = None

    # ---- sampling --------------------------------------------------------------------------

    def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        deadline = time.perf_counter_ns()
        while True:
            self._tick()
            deadline += interval_ns
            now = time.perf_counter_ns()
            if now > deadline:
                # Behind schedule (a slow call, a busy host): skip the missed ticks instead of
                # bursting to catch up, which would bunch samples together.
                deadline += ((now - deadline) // interval_ns + 1) * interval_ns
            if self._stop.wait((deadline - now) / 1e9):
                return

    def _tick(self) -> None:
        batch: list[Sample] = []
        for dev in self._devs:
            batch.extend(self._read_basic(dev))
            if dev.gpm is not None:
                g = self._read_gpm(dev)
                if g is not None:
                    batch.append(g)
        with self._lock:
            self._samples.extend(batch)
            self.n_ticks += 1

    def _read_basic(self, dev: _Device) -> list[Sample]:
        nvml = self._nvml
        out = []
        for family, readers in FAMILY_READERS.items():
            values: dict[str, float | int] = {}
            t0 = time.time_ns()
            for reader in readers:
                if reader in dev.dead:
                    continue
                try:
                    raw = reader(nvml, dev.handle)
                except Exception as exc:
                    if _is_not_supported(nvml, exc):
                        dev.dead.add(reader)
                    continue
                for key, value in raw.items():
                    num = _number(value)
                    if num is not None:
                        values[key] = num
            t1 = time.time_ns()
            if values:
                out.append(Sample(dev.info.index, family, (t0 + t1) // 2, values))
        return out

    def _read_gpm(self, dev: _Device) -> Sample | None:
        nvml = self._nvml
        g = dev.gpm
        assert g is not None
        window_ns = int(self.gpm_window_s * 1e9)
        if g.have_prev:
            remaining_ns = window_ns - (time.perf_counter_ns() - g.prev_perf_ns)
            if remaining_ns > 0:
                # A tick that arrives a hair early would otherwise double the window.
                if remaining_ns > window_ns // 20:
                    return None
                time.sleep(remaining_ns / 1e9)
        t0 = time.time_ns()
        p0 = time.perf_counter_ns()
        try:
            nvml.nvmlGpmSampleGet(dev.handle, g.spare)
        except Exception:
            g.have_prev = False
            return None
        t_ns = (t0 + time.time_ns()) // 2
        if not g.have_prev:
            g.prev, g.spare = g.spare, g.prev
            g.prev_t_ns, g.prev_perf_ns, g.have_prev = t_ns, p0, True
            return None
        values = self._gpm_metrics(g.prev, g.spare)
        mid_ns = (g.prev_t_ns + t_ns) // 2
        g.prev, g.spare = g.spare, g.prev
        g.prev_t_ns, g.prev_perf_ns = t_ns, p0
        if not values:
            return None
        return Sample(dev.info.index, C.GPM, mid_ns, values)

    def _gpm_metrics(self, first: Any, second: Any) -> dict[str, float | int]:
        nvml = self._nvml
        series = list(C.GPM_METRIC_IDS.items())
        mg = nvml.c_nvmlGpmMetricsGet_t()
        mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(series)
        mg.sample1 = first
        mg.sample2 = second
        for i, (_, (metric_id, _scale)) in enumerate(series):
            mg.metrics[i].metricId = metric_id
        try:
            nvml.nvmlGpmMetricsGet(mg)
        except Exception:
            return {}
        values: dict[str, float | int] = {}
        for i, (name, (_, scale)) in enumerate(series):
            m = mg.metrics[i]
            if int(m.nvmlReturn) != 0:
                continue
            num = _number(m.value)
            if num is not None:
                values[name] = num * scale
        return values


def _safe_text(fn: Callable[[Any], Any], handle: Any) -> str:
    try:
        return _text(fn(handle))
    except Exception:  # pynvml raises its own NVMLError subclasses per driver; a name is not worth failing capture
        return "unknown"


def _is_not_supported(nvml: Any, exc: Exception) -> bool:
    code = getattr(exc, "value", None)
    return code is not None and code in (
        getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3),
        getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4),
        getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
    )
