"""``load()``: a trace file to a :class:`Trace`, through the cache when it can."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from traceinsight.errors import TraceFormatError
from traceinsight.trace import cache as trace_cache
from traceinsight.trace.link import link
from traceinsight.trace.model import DeviceProperties, Trace, TraceMeta, UnprofiledSteps
from traceinsight.trace.reader import RawTrace, read_bytes, read_trace

_OPTION_KEYS = ("record_shapes", "with_stack", "profile_memory", "with_modules", "with_flops")


def load(
    path: str | os.PathLike[str], *, cache: bool = True, workers: int | None = None
) -> Trace:
    """Load a Kineto trace (``.json``, ``.json.gz``, ``*.pt.trace.json(.gz)``).

    ``workers``: processes that decode a big plain (not gzipped) file, this one included;
    None: one per core (or ``TRACEINSIGHT_DECODE_WORKERS``), 1: decode here alone.
    Raises :class:`TraceFormatError` naming the file and the problem when it cannot be read.
    """
    file_path = Path(path)
    if cache and file_path.is_file():
        cached = trace_cache.read(file_path)
        if cached is not None:
            return cached
    trace = _load_uncached(file_path, workers)
    if cache:
        trace_cache.write(file_path, trace)
    return trace


def _load_uncached(path: Path, workers: int | None = None) -> Trace:
    data = read_bytes(path)
    file_bytes = path.stat().st_size
    try:
        raw = read_trace(path, data, workers=workers)
        del data
        base = _base_time_ns(raw.header)
        # link() gets the only reference to the big frame, so it can free it as it goes.
        linked = link(raw.take_durations(), raw.counters, raw.memory, base, raw.pid_labels)
        if linked.events.height == 0 and linked.counters.height == 0 and linked.memory.height == 0:
            dropped = "; ".join(w for w in linked.warnings if "ignored" in w)
            raise TraceFormatError(path, "no usable events" + (f" ({dropped})" if dropped else ""))
    except TraceFormatError:
        raise
    except Exception as exc:  # the contract: bad input yields TraceFormatError, never a crash
        raise TraceFormatError(
            path, f"unreadable trace content ({type(exc).__name__}: {exc})"
        ) from exc
    meta = _meta(path, file_bytes, raw, base, linked.warnings)
    if linked.iterations is not None:
        meta = replace(meta, iterations=linked.iterations.to_dict())
    return Trace(
        events=linked.events,
        kernels=linked.kernels,
        counters=linked.counters,
        memory=linked.memory,
        meta=meta,
    )


def _base_time_ns(header: dict[str, Any]) -> int | None:
    base = header.get("baseTimeNanoseconds")
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        return None
    return int(base)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _devices(header: dict[str, Any]) -> tuple[DeviceProperties, ...]:
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return ()
    devices = []
    for i, entry in enumerate(props):
        if not isinstance(entry, dict):
            continue
        devices.append(
            DeviceProperties(
                id=_as_int(entry.get("id")) if _as_int(entry.get("id")) is not None else i,  # type: ignore[arg-type]
                name=str(entry.get("name", "unknown")),
                total_global_mem_bytes=_as_int(entry.get("totalGlobalMem")),
                num_sms=_as_int(entry.get("numSms")),
                compute_major=_as_int(entry.get("computeMajor")),
                compute_minor=_as_int(entry.get("computeMinor")),
                raw=entry,
            )
        )
    return tuple(devices)


def _meta(
    path: Path, file_bytes: int, raw: RawTrace, base: int | None, link_warnings: list[str]
) -> TraceMeta:
    header = raw.header
    versions = {
        k: str(v) for k, v in header.items() if "version" in k.lower() and k != "schemaVersion"
    }
    options = {k: header[k] for k in _OPTION_KEYS if k in header}
    capture = header.get("traceinsight")
    if isinstance(capture, dict) and isinstance(capture.get("capture"), dict):
        for key, value in (capture["capture"].get("options") or {}).items():
            options.setdefault(key, value)
    distributed = header.get("distributedInfo")
    unprofiled = None
    if isinstance(capture, dict) and isinstance(capture.get("capture"), dict) and "unprofiled_steps" in capture["capture"]:
        unprofiled = UnprofiledSteps.parse(capture["capture"]["unprofiled_steps"])
        if unprofiled is None:
            link_warnings = [*link_warnings, "traceinsight.capture.unprofiled_steps is not as capture writes it: ignored"]
    return TraceMeta(
        path=str(path),
        file_bytes=file_bytes,
        schema_version=header.get("schemaVersion"),
        base_time_ns=base,
        devices=_devices(header),
        distributed=distributed if isinstance(distributed, dict) else None,
        versions=versions,
        profiler_options=options,
        capture=capture if isinstance(capture, dict) else None,
        trace_id=str(header["trace_id"]) if "trace_id" in header else None,
        host_name=str(header["host_name"]) if "host_name" in header else None,
        process_names=raw.process_names,
        thread_names={f"{p}:{t}": n for (p, t), n in raw.thread_names.items()},
        pid_labels=raw.pid_labels,
        phase_counts=raw.phase_counts,
        warnings=tuple(raw.warnings + link_warnings),
        unprofiled_steps=unprofiled,
    )
