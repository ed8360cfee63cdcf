"""Terminal view of the memory section."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.render import views
from traceinsight.render.sections.ops import compact_table
from traceinsight.render.units import ns, pct, size


def _when(ts_ns: int | None, step: int | None, origin_ns: int) -> str:
    if ts_ns is None:
        return "-"
    where = f"+{ns(ts_ns - origin_ns)}"
    return f"{where} (step {step})" if step is not None else where


def render_terminal(result: MemoryResult) -> RenderableType:
    peak_rows = [
        [
            row["device"],
            f"{row['events']:,}",
            size(row["peak_allocated_bytes"]),
            _when(row["peak_allocated_ns"], row["peak_allocated_step"], result.origin_ns),
            size(row["peak_reserved_bytes"]),
            _when(row["peak_reserved_ns"], row["peak_reserved_step"], result.origin_ns),
            size(row["traced_at_peak_bytes"]),
        ]
        for row in result.peaks.iter_rows(named=True)
    ]
    headers = ["device", "events", "peak allocated", "at", "peak reserved", "at", "traced at peak"]
    parts: list[RenderableType] = [compact_table(headers, peak_rows)]
    if result.top_ops.height:
        top_rows = [
            [
                row["device"],
                row["op_name"] if row["called_from"] is None else f"{row['op_name']} (in {row['called_from']})",
                size(row["bytes"]),
                f"{row['allocations']:,}",
                pct(row["share_of_peak_pct"]),
            ]
            for row in result.top_ops.iter_rows(named=True)
        ]
        parts.append(
            compact_table(
                ["device", "op", "bytes", "allocations", "of peak"],
                top_rows,
                names=2,
                title="held at the peak, by the op that allocated it",
            )
        )
    if result.step_ends.height:
        ends = result.step_ends.group_by("device", maintain_order=True).agg(
            pl.col("allocated_bytes").first().alias("first"),
            pl.col("allocated_bytes").last().alias("last"),
            pl.len().alias("steps"),
        )
        for row in ends.iter_rows(named=True):
            parts.append(
                Text(
                    f"{row['device']}: allocated at step end {size(row['first'])} → {size(row['last'])} "
                    f"over {row['steps']} steps"
                )
            )
    elif not result.has_steps:
        parts.append(Text("no ProfilerStep spans: step-over-step growth not checked", style="dim"))
    for leak in result.leaks:
        parts.append(
            Text(
                f"possible leak on {leak.device}: allocated memory at step end grew at every step "
                f"from step {leak.first_step} to {leak.last_step} ({size(leak.first_bytes)} → "
                f"{size(leak.last_bytes)}, +{size(leak.growth_per_step_bytes)} per step)",
                style="bold red",
            )
        )
    if result.step_ends.height and not result.leaks:
        parts.append(Text("no steady step-over-step growth (no leak suspected)", style="green"))
    parts.extend(Text(f"note: {note}", style="dim") for note in result.notes)
    return Group(*parts)


views.register(MemoryResult, terminal=render_terminal)
