"""Builders for small hand-made Kineto-style traces (edge cases no real capture produced).

These are written by hand, not recorded by a profiler; the tests that use them say so.
Times are given in µs, like Kineto's ``ts``/``dur``.

Two ways to build one, on the same event builders:

- a list of events from :func:`op`, :func:`launch` and :func:`kernel`, written by
  :func:`write_trace` (the event-level tests: odd fields, odd layouts);
- a :class:`HandMadeTrace` timeline, where one host process launches onto device 0 and each
  GPU activity gets its launch and a fresh correlation id (the analysis scenario tests).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST_PID = 4242
MAIN_TID = 4242


def write_trace(
    path: Path,
    events: list[dict[str, Any]],
    *,
    gz: bool = False,
    indent: int | None = 1,
    **header: Any,
) -> Path:
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []} | header
    doc["traceEvents"] = events
    raw = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def op(name: str, ts: float, dur: float | None, *, tid: int | str = MAIN_TID, pid: int | str = HOST_PID,
       cat: str = "cpu_op", args: dict[str, Any] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts}
    if dur is not None:
        event["dur"] = dur
    if args is not None:
        event["args"] = args
    return event


def launch(name: str, ts: float, dur: float, correlation: int, **kw: Any) -> dict[str, Any]:
    return op(name, ts, dur, cat=kw.pop("cat", "cuda_runtime"), args={"correlation": correlation}, **kw)


def kernel(name: str, ts: float, dur: float, correlation: int, *, device: int = 0, stream: int = 7,
           cat: str = "kernel", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    args = {"correlation": correlation, "device": device, "stream": stream} | (extra or {})
    return {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur, "args": args}


# The timeline's host process and thread (the ids its scenario tests were written with).
TIMELINE_HOST_PID = 100
TIMELINE_MAIN_TID = 1
TIMELINE_DEVICE_PROPERTIES = [
    {"id": 0, "name": "Hand-made GPU", "totalGlobalMem": 80 * 2**30, "numSms": 132}
]


@dataclass
class HandMadeTrace:
    """A hand-made timeline; each builder method appends events and returns what the test
    needs to know."""

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
        tid: int = TIMELINE_MAIN_TID,
        args: dict[str, Any] | None = None,
    ) -> None:
        self.events.append(op(name, ts, dur, cat=cat, pid=TIMELINE_HOST_PID, tid=tid, args=args or {}))

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
        tid: int = TIMELINE_MAIN_TID,
        args: dict[str, Any] | None = None,
    ) -> int:
        """A GPU activity and its launch (at launch_ts, by default 5 µs before it); returns
        the correlation id that links them."""
        corr = self.next_correlation
        self.next_correlation += 1
        lts = ts - 5.0 if launch_ts is None else launch_ts
        self.events.append(
            launch(launch_name, lts, launch_dur, corr, pid=TIMELINE_HOST_PID, tid=tid)
        )
        self.events.append(
            kernel(name, ts, dur, corr, device=device, stream=stream, cat=cat, extra=args)
        )
        return corr

    def write(self, path: Path) -> Path:
        return write_trace(
            path,
            self.events,
            indent=None,
            deviceProperties=TIMELINE_DEVICE_PROPERTIES,
            baseTimeNanoseconds=self.base_ns,
        )
