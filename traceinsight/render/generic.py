"""A format-neutral view of any result: its scalar facts and the head of its main table.

Every renderer falls back to this when a section has no dedicated view, so a newly registered
analysis shows up in every report format without renderer changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.render.units import by_unit, label

_SKIP_KEYS = frozenset({"schema_version", "available", "reason", "name"})
# Raw enums and ids that repeat what a readable column already says (``device`` = cuda:0).
_SKIP_COLUMNS = frozenset({"device_type", "device_index", "culprit_id", "region_id", "pid", "tid"})
# The columns worth a reader's attention, in order, for the tables whose frames are wide.
PREFERRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "ops": ("name", "input_dims", "calls", "host_total_ns", "host_self_ns", "gpu_total_ns", "gpu_self_ns", "gpu_cpu_ratio"),
    "kernels": ("name", "family", "calls", "total_ns", "share_pct", "mean_ns", "grid", "block", "occupancy_pct"),
    "memory": ("device", "events", "peak_allocated_bytes", "peak_allocated_step", "peak_reserved_bytes", "traced_at_peak_bytes"),
    "gaps": ("device", "dur_ns", "step", "cause", "culprit"),
    "steps": ("step", "host_dur_ns", "device_dur_ns", "kernel_ns", "memcpy_ns", "runtime_ns", "dataloader_ns", "cpu_exec_ns", "is_warmup"),
    "bound": ("name", "kind", "dur_ns", "busy_pct", "label", "confidence", "tflops", "tbps", "intensity", "pct_of_roofline"),
    "findings": ("title", "saving_pct", "saving_ns", "confidence", "fix"),
}


def is_timestamp(key: str) -> bool:
    """Absolute times (ns since the trace's base, or the clock origin) mean nothing to a
    reader; durations do. ``peak_allocated_ns`` is when the peak happened, not a length."""
    k = key.lower()
    return (
        k in ("ts_ns", "start_ns", "end_ns", "origin_ns")
        or k.endswith(("_start_ns", "_end_ns", "_ts_ns", "_at_ns"))
        or (k.startswith("peak_") and k.endswith("_ns"))
    )


@dataclass(frozen=True)
class GenericView:
    facts: tuple[tuple[str, str], ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    total_rows: int


def facts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The scalar top-level fields of a result's ``to_dict()``, formatted by unit."""
    out: list[tuple[str, str]] = []
    for key, value in data.items():
        if key in _SKIP_KEYS or is_timestamp(key):
            continue
        if isinstance(value, dict):
            # One level of nested figures (e.g. launch statistics), scalars only.
            out.extend(
                (f"{label(key)}: {label(sub)}", by_unit(sub, v))
                for sub, v in value.items()
                if not isinstance(v, (dict, list)) and not is_timestamp(sub) and sub not in _SKIP_KEYS
            )
            continue
        if isinstance(value, list):
            if value and len(value) <= 8 and all(isinstance(v, (str, int, float)) for v in value):
                out.append((label(key), by_unit(key, value)))
            continue
        out.append((label(key), by_unit(key, value)))
    return out


def table(
    frame: pl.DataFrame, *, max_rows: int = 10, max_cols: int = 8, prefer: tuple[str, ...] = ()
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Header and formatted rows of the head of a frame: the ``prefer`` columns when it has
    them, else the first ones; nested, timestamp, id and all-empty columns left out."""
    head = frame.head(max_rows)
    simple = [
        c
        for c, dtype in frame.schema.items()
        if not isinstance(dtype, (pl.List, pl.Struct, pl.Array))
        and not is_timestamp(c)
        and c not in _SKIP_COLUMNS
        and head[c].null_count() < head.height
    ]
    preferred = [c for c in prefer if c in simple]
    simple = (preferred or simple)[:max_cols]
    head = head.select(simple)
    rows = tuple(tuple(by_unit(c, v) for c, v in zip(simple, row, strict=True)) for row in head.iter_rows())
    return tuple(label(c) for c in simple), rows


def view(result: Result, *, max_rows: int = 10, max_cols: int = 10) -> GenericView:
    frame = result.to_polars()
    prefer = PREFERRED_COLUMNS.get(getattr(result, "name", ""), ())
    columns, rows = table(frame, max_rows=max_rows, max_cols=max_cols, prefer=prefer)
    return GenericView(
        facts=tuple(facts(result.to_dict())),
        columns=columns,
        rows=rows,
        total_rows=frame.height,
    )
