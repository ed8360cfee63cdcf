"""Builders for small hand-made Kineto-style traces (edge cases no real capture produced).

These are written by hand, not recorded by a profiler; the tests that use them say so.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

HOST_PID = 4242
MAIN_TID = 4242


def write_trace(path: Path, events: list[dict[str, Any]], *, gz: bool = False, **header: Any) -> Path:
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": []} | header
    doc["traceEvents"] = events
    raw = json.dumps(doc, indent=1).encode()
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
