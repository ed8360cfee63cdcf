"""A format-neutral view of any result: its scalar facts and the head of its main table.

Every renderer falls back to this when a section has no dedicated view, so a newly registered
analysis shows up in every report format without renderer changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from traceinsight.analysis.base import Result
from traceinsight.render.units import by_unit, label

_SKIP_KEYS = frozenset({"schema_version", "available", "reason", "name"})


def is_timestamp(key: str) -> bool:
    """Absolute times (ns since the trace's base) mean nothing to a reader; durations do."""
    k = key.lower()
    return k in ("ts_ns", "start_ns", "end_ns") or k.endswith(("_start_ns", "_end_ns", "_ts_ns"))


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


def table(frame: pl.DataFrame, *, max_rows: int = 10, max_cols: int = 8) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Header and formatted rows of the head of a frame (nested columns left out)."""
    simple = [
        c
        for c, dtype in frame.schema.items()
        if not isinstance(dtype, (pl.List, pl.Struct, pl.Array)) and not is_timestamp(c)
    ][:max_cols]
    head = frame.select(simple).head(max_rows)
    rows = tuple(tuple(by_unit(c, v) for c, v in zip(simple, row, strict=True)) for row in head.iter_rows())
    return tuple(label(c) for c in simple), rows


def view(result: Result, *, max_rows: int = 10, max_cols: int = 8) -> GenericView:
    frame = result.to_polars()
    columns, rows = table(frame, max_rows=max_rows, max_cols=max_cols)
    return GenericView(
        facts=tuple(facts(result.to_dict())),
        columns=columns,
        rows=rows,
        total_rows=frame.height,
    )
