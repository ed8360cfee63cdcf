"""Samples → Chrome counter events in the trace JSON, and the atomic trace write."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from traceinsight.atomic import open_atomic
from traceinsight.capture import counters as C
from traceinsight.capture.nvml import Sample

# Kineto traces whose ts are absolute epoch microseconds start above this (year 2001).
_EPOCH_US_FLOOR = 1e15


def counter_events(samples: Iterable[Sample], base_ns: int) -> list[dict[str, Any]]:
    """One Chrome counter event per sample, on the GPU's pid (= CUDA device index, as Kineto)."""
    return [
        {
            "ph": "C",
            "name": s.family,
            "pid": int(s.device),
            "tid": 0,
            "ts": round((s.t_ns - base_ns) / 1000.0, 3),
            "args": dict(s.values),
        }
        for s in samples
    ]


def _min_ts_us(events: list[Any]) -> float | None:
    best = None
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") == "M":
            continue
        ts = ev.get("ts")
        if isinstance(ts, (int, float)) and (best is None or ts < best):
            best = ts
    return best


def ensure_base_time(trace: dict[str, Any], fallback_ns: int) -> bool:
    """Make sure ``baseTimeNanoseconds`` exists; return True when it had to be estimated.

    Traces whose ts are already epoch microseconds get base 0 (ts*1000 is then wall time);
    otherwise ts are relative to an unknown origin and ``fallback_ns`` (wall time when the
    profiler started) is the best estimate we have.
    """
    if isinstance(trace.get("baseTimeNanoseconds"), int):
        return False
    min_ts = _min_ts_us(trace.get("traceEvents", []))
    if min_ts is not None and min_ts > _EPOCH_US_FLOOR:
        trace["baseTimeNanoseconds"] = 0
    else:
        trace["baseTimeNanoseconds"] = int(fallback_ns)
    return True


def trace_window_ns(trace: dict[str, Any]) -> tuple[int, int] | None:
    """Wall-clock [first, last] ns covered by the trace's timed events."""
    base = trace.get("baseTimeNanoseconds")
    if not isinstance(base, int):
        return None
    lo = hi = None
    for ev in trace.get("traceEvents", []):
        if not isinstance(ev, dict) or ev.get("ph") in ("M", "C"):
            continue
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        end = ts + (ev.get("dur") or 0)
        lo = ts if lo is None or ts < lo else lo
        hi = end if hi is None or end > hi else hi
    if lo is None or hi is None:
        return None
    return base + int(lo * 1000), base + int(hi * 1000)


def merge_samples(
    trace: dict[str, Any],
    samples: Iterable[Sample],
    capture_meta: Mapping[str, Any],
    *,
    fallback_base_ns: int,
    margin_ns: int = 0,
) -> dict[str, Any]:
    """Add counter events for the samples inside the trace's window, and the capture metadata.

    Samples outside [first event - margin, last event + margin] are left out so a trace of one
    schedule cycle carries only its own counters.
    """
    estimated = ensure_base_time(trace, fallback_base_ns)
    base = trace["baseTimeNanoseconds"]
    window = trace_window_ns(trace)
    chosen = list(samples)
    if window is not None:
        lo, hi = window[0] - margin_ns, window[1] + margin_ns
        chosen = [s for s in chosen if lo <= s.t_ns <= hi]
    events = trace.setdefault("traceEvents", [])
    events.extend(counter_events(chosen, base))
    meta = dict(capture_meta)
    meta["n_samples"] = len({(s.device, s.t_ns) for s in chosen if s.family == C.NVML_UTILIZATION})
    meta["n_counter_events"] = len(chosen)
    if estimated:
        meta["base_time_estimated"] = True
    from traceinsight.version import __version__

    trace[C.TRACE_META_KEY] = {"version": __version__, "capture": meta}
    return trace


def read_trace(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "rt", encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{p}: not a Chrome trace object")
    return data


def _no_nan(obj: Any) -> Any:
    # json.dumps would write NaN/Infinity, which strict JSON readers (and Perfetto) reject.
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_no_nan(v) for v in obj]
    return obj


def dumps_trace(trace: Mapping[str, Any]) -> bytes:
    try:
        text = json.dumps(trace, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_no_nan(trace), separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def write_bytes_atomic(
    data: bytes, path: str | os.PathLike[str], *, gz: bool | None = None
) -> Path:
    """Write to a temp file in the target's directory, then rename over the target.

    A crash at any point leaves either the previous file or the new one, never a partial one.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if gz is None:
        gz = target.name.endswith(".gz")
    with open_atomic(target) as raw:
        if gz:
            # mtime=0 keeps the output reproducible for identical traces.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as zf:
                zf.write(data)
        else:
            raw.write(data)
    return target


def write_trace_atomic(trace: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    return write_bytes_atomic(dumps_trace(trace), path)
