"""Terminal view of the overview section."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.units import ns, pct, size
from traceinsight.trace.iterations import describe


def capture_line(merge: dict[str, Any]) -> str:
    """What a merged capture gave: graphs matched, and the share of graph time with ops."""
    files = ", ".join(str(f).rsplit("/", 1)[-1] for f in merge.get("files", []))
    return (
        f"{merge.get('graphs', 0)} replayed ({pct(merge.get('graph_pct'))} of kernel time), "
        f"{merge.get('matched', 0)} matched to a capture: ops and shapes for {pct(merge.get('merged_pct'))} "
        f"of their kernel time (from {files})"
    )


def render_terminal(result: OverviewResult) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("trace", f"{result.path} ({size(result.file_bytes)})")
    head.add_row("window", ns(result.window_ns))
    if result.steps and result.step_source not in (None, "ProfilerStep"):
        head.add_row("steps", describe(result.step_source, len(result.steps), result.prefill_steps))
    elif result.steps:
        first, last = result.steps[0], result.steps[-1]
        span = f"ProfilerStep#{first}" if first == last else f"ProfilerStep#{first}–#{last}"
        head.add_row("steps", f"{len(result.steps)} ({span})")
    else:
        head.add_row("steps", "none recorded (no ProfilerStep spans)")
    if result.graph_capture:
        head.add_row("graphs", capture_line(result.graph_capture))
    counts = ", ".join(f"{kind} {n:,}" for kind, n in result.counts_by_kind.items())
    head.add_row("events", counts or "none")
    extras = []
    if result.has_shapes:
        extras.append("input shapes")
    if result.has_stack:
        extras.append("python stacks")
    if result.memory_events:
        extras.append(f"{result.memory_events:,} memory events")
    if result.counters:
        extras.append(f"{result.counters:,} counter samples")
    head.add_row("recorded", ", ".join(extras) or "-")
    parts: list[RenderableType] = [head]
    if result.devices:
        table = FitTable(
            [Col("GPU"), Col("name", "name"), Col("kernels"), Col("busy"), Col("busy %")],
            [
                (str(dev.device), dev.name or "?", f"{dev.kernels:,}", ns(dev.busy_ns), pct(dev.busy_pct))
                for dev in result.devices
            ],
        )
        parts.append(table)
    elif result.unrecorded_gpu_calls:
        parts.append(
            Text(
                f"GPU activity not recorded: {result.unrecorded_gpu_calls:,} host calls put work on the GPU, "
                "and the trace holds none of it (see the window section)",
                style="yellow",
            )
        )
    else:
        parts.append(Text("no GPU activity in this trace (CPU-only capture?)", style="yellow"))
    for warning in result.warnings:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    for note in (result.graph_capture or {}).get("notes", []):
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)


views.register(OverviewResult, terminal=render_terminal)
