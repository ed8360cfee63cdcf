"""Hand-made Kineto-like traces for the timeline tests (not recorded by a profiler).

Times are given in µs, like Kineto's ``ts``/``dur``; one host process (pid 100) launches
onto device 0. Each builder method appends events and returns what the test needs to know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST_PID = 100
MAIN_TID = 1


@dataclass
class HandMadeTrace:
    events: list[dict[str, Any]] = field(default_factory=list)
    next_correlation: int = 1
    base_ns: int = 1_700_000_000_000_000_000

    def host(
        self,
        name: str,
        ts: float,
        dur: float,
        *,
        cat: str = "cpu_op",
        tid: int = MAIN_TID,
        args: dict[str, Any] | None = None,
    ) -> None:
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": tid, "ts": ts, "dur": dur, "args": args or {}}
        )

    def step(self, n: int, ts: float, dur: float) -> None:
        self.host(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def gpu(
        self,
        name: str,
        ts: float,
        dur: float,
        *,
        cat: str = "kernel",
        launch_ts: float | None = None,
        launch_dur: float = 2.0,
        launch_name: str = "cudaLaunchKernel",
        stream: int = 7,
        device: int = 0,
        tid: int = MAIN_TID,
        args: dict[str, Any] | None = None,
    ) -> int:
        """A GPU activity and (unless launch_ts is None... it defaults to ts - 5) its launch."""
        corr = self.next_correlation
        self.next_correlation += 1
        lts = ts - 5.0 if launch_ts is None else launch_ts
        self.host(launch_name, lts, launch_dur, cat="cuda_runtime", tid=tid, args={"correlation": corr})
        gpu_args = {"device": device, "stream": stream, "correlation": corr} | (args or {})
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": gpu_args}
        )
        return corr

    def write(self, path: Path) -> Path:
        doc = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "Hand-made GPU", "totalGlobalMem": 80 * 2**30, "numSms": 132}],
            "baseTimeNanoseconds": self.base_ns,
            "traceEvents": self.events,
        }
        path.write_text(json.dumps(doc))
        return path
