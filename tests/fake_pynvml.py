"""A stand-in for the ``pynvml`` module (nvidia-ml-py) at the NVML boundary.

It implements the functions capture calls, with values a test controls, and records every
call with its wall-clock span so tests can check cadence and alignment. Install it with
``monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(...).module())``.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


@dataclass
class _Util:
    gpu: int
    memory: int


@dataclass
class _Mem:
    total: int
    free: int
    used: int


@dataclass
class _Support:
    version: int = 1
    isSupportedDevice: int = 0


@dataclass
class _Metric:
    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


@dataclass
class _MetricsGet:
    version: int = 0
    numMetrics: int = 0
    sample1: Any = None
    sample2: Any = None
    metrics: list[_Metric] = field(default_factory=lambda: [_Metric() for _ in range(210)])


@dataclass
class _GpmSample:
    t_ns: int = 0
    serial: int = 0


@dataclass
class Call:
    name: str
    start_ns: int
    end_ns: int
    result: Any = None


class FakeNvml:
    """Controllable NVML: set ``util_gpu`` (a number or a function of time_ns), ``hopper``, ..."""

    def __init__(
        self,
        *,
        n_devices: int = 1,
        hopper: bool = True,
        init_error: int | None = None,
        call_latency_s: float = 0.0,
        util_gpu: float | Callable[[int], float] = 50,
        power_mw: int = 300_000,
        energy_step_mj: int = 30_000,
    ) -> None:
        self.n_devices = n_devices
        self.hopper = hopper
        self.init_error = init_error
        self.call_latency_s = call_latency_s
        self.util_gpu = util_gpu
        self.power_mw = power_mw
        self.energy_step_mj = energy_step_mj
        self.calls: list[Call] = []
        self.handles_by_uuid = {f"GPU-fake-{i}": i for i in range(n_devices)}
        self.inited = 0
        self.throttle_mask = 0x04 | 0x40
        self._energy_mj = 1_000_000
        self._serial = 0
        self._lock = threading.Lock()

    # ---- bookkeeping -----------------------------------------------------------------------

    def _call(self, name: str, fn: Callable[[], Any]) -> Any:
        start = time.time_ns()
        if self.call_latency_s:
            time.sleep(self.call_latency_s)
        result = fn()
        end = time.time_ns()
        with self._lock:
            self.calls.append(Call(name, start, end, result))
        return result

    def calls_named(self, name: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.name == name]

    def _util_now(self) -> int:
        u = self.util_gpu
        return int(u(time.time_ns()) if callable(u) else u)

    # ---- the module ------------------------------------------------------------------------

    def module(self) -> types.ModuleType:
        m = types.ModuleType("pynvml")
        m.NVMLError = NVMLError  # type: ignore[attr-defined]
        m.NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED  # type: ignore[attr-defined]
        m.NVML_ERROR_NO_PERMISSION = NVML_ERROR_NO_PERMISSION  # type: ignore[attr-defined]
        m.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
        m.NVML_CLOCK_MEM = 2  # type: ignore[attr-defined]
        m.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
        m.NVML_GPM_METRICS_GET_VERSION = 1  # type: ignore[attr-defined]
        m.c_nvmlGpmMetricsGet_t = _MetricsGet  # type: ignore[attr-defined]
        fake = self

        def init() -> None:
            if fake.init_error is not None:
                raise NVMLError(fake.init_error)
            fake.inited += 1

        def shutdown() -> None:
            fake.inited -= 1

        def by_index(i: int) -> int:
            if not 0 <= i < fake.n_devices:
                raise NVMLError(2)
            return i

        def by_uuid(uuid: str) -> int:
            if uuid not in fake.handles_by_uuid:
                raise NVMLError(2)
            return fake.handles_by_uuid[uuid]

        def util(h: int) -> _Util:
            return fake._call("util", lambda: _Util(gpu=fake._util_now(), memory=20))

        def mem(h: int) -> _Mem:
            return fake._call("mem", lambda: _Mem(total=80 << 30, free=70 << 30, used=10 << 30))

        def power(h: int) -> int:
            return fake._call("power", lambda: fake.power_mw)

        def energy(h: int) -> int:
            def read() -> int:
                fake._energy_mj += fake.energy_step_mj
                return fake._energy_mj

            return fake._call("energy", read)

        def clock(h: int, kind: int) -> int:
            return fake._call("clock", lambda: 1980 if kind == 1 else 2619)

        def temp(h: int, kind: int) -> int:
            return fake._call("temp", lambda: 45)

        def reasons(h: int) -> int:
            return fake._call("reasons", lambda: fake.throttle_mask)

        def pcie(h: int, counter: int) -> int:
            fake._call("pcie_throughput", lambda: None)
            return 0

        def gpm_support(h: int) -> _Support:
            return _Support(isSupportedDevice=1 if fake.hopper else 0)

        def gpm_alloc() -> _GpmSample:
            return _GpmSample()

        def gpm_free(s: _GpmSample) -> None:
            return None

        def gpm_get(h: int, s: _GpmSample) -> _GpmSample:
            def read() -> _GpmSample:
                fake._serial += 1
                s.t_ns, s.serial = time.time_ns(), fake._serial
                return _GpmSample(s.t_ns, s.serial)

            fake._call("gpm_sample", read)
            return s

        def gpm_metrics(mg: _MetricsGet) -> _MetricsGet:
            def compute() -> tuple[int, int]:
                window_s = (mg.sample2.t_ns - mg.sample1.t_ns) / 1e9
                for i in range(mg.numMetrics):
                    metric = mg.metrics[i]
                    if window_s < 0.1:
                        # Real GPM returns garbage for windows under 100 ms.
                        metric.value, metric.nvmlReturn = float("nan"), NVML_SUCCESS
                    else:
                        # The value encodes the window's first sample, for alignment tests.
                        metric.value = float(mg.sample1.serial)
                        metric.nvmlReturn = NVML_SUCCESS
                return mg.sample1.serial, mg.sample2.serial

            fake._call("gpm_metrics", compute)
            return mg

        def name(h: int) -> str:
            return "Fake H100" if fake.hopper else "Fake A100"

        def uuid(h: int) -> str:
            return f"GPU-fake-{h}"

        table = {
            "nvmlInit": init,
            "nvmlShutdown": shutdown,
            "nvmlDeviceGetHandleByIndex": by_index,
            "nvmlDeviceGetHandleByUUID": by_uuid,
            "nvmlDeviceGetName": name,
            "nvmlDeviceGetUUID": uuid,
            "nvmlDeviceGetUtilizationRates": util,
            "nvmlDeviceGetMemoryInfo": mem,
            "nvmlDeviceGetPowerUsage": power,
            "nvmlDeviceGetTotalEnergyConsumption": energy,
            "nvmlDeviceGetClockInfo": clock,
            "nvmlDeviceGetTemperature": temp,
            "nvmlDeviceGetCurrentClocksEventReasons": reasons,
            "nvmlDeviceGetPcieThroughput": pcie,
            "nvmlGpmQueryDeviceSupport": gpm_support,
            "nvmlGpmSampleAlloc": gpm_alloc,
            "nvmlGpmSampleFree": gpm_free,
            "nvmlGpmSampleGet": gpm_get,
            "nvmlGpmMetricsGet": gpm_metrics,
        }
        for k, v in table.items():
            setattr(m, k, v)
        return m


def install(monkeypatch: Any, **kwargs: Any) -> FakeNvml:
    """Put a fresh FakeNvml in ``sys.modules['pynvml']`` and forget earlier one-time warnings."""
    import sys

    from traceinsight.capture import notices

    fake = FakeNvml(**kwargs)
    monkeypatch.setitem(sys.modules, "pynvml", fake.module())
    notices.forget_reported()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake
