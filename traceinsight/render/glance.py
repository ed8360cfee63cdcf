"""The first screen of ``analyze`` on a terminal: the verdict, the findings in a line or two
each, then one line per section, so that the answer fits one 80×50 screen.

The whole report (``--full``), one section (``--only``) and anything written to a pipe or a file
are the full views of ``render/terminal.py``; this is only what a person sees first.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.report import Report
from traceinsight.render import generic
from traceinsight.render.sections.findings import saving_text
from traceinsight.render.shared import ordered
from traceinsight.render.terminal import headline_renderable, panel, text_console
from traceinsight.render.units import ns, size

# Findings listed on the first screen; the rest are counted.
MAX_FINDINGS = 5


def _overview(r: Any) -> str:
    parts = [f"window {ns(r.window_ns)}"]
    if r.steps:
        parts.append(f"{len(r.steps)} steps")
    parts.extend(f"GPU {d.device} {d.name} busy {d.busy_pct:.1f} %" for d in r.devices[:2])
    if r.warnings:
        parts.append(f"{len(r.warnings)} warning(s)")
    return "; ".join(parts)


def _breakdown(r: Any) -> str:
    frame = r.by_device.sort("dur_ns", descending=True)
    shares = [f"{row['category']} {100 * row['share']:.1f} %" for row in frame.head(3).iter_rows(named=True)]
    return ", ".join(shares)


def _gaps(r: Any) -> str:
    text = f"{r.gap_count:,} gap(s) ≥ {ns(r.threshold_ns)}, {ns(r.gap_idle_ns)} idle"
    if r.by_cause.height:
        top = r.by_cause.sort("idle_ns", descending=True).row(0, named=True)
        text += f"; most from {top['cause'].replace('_', ' ')} ({100 * top['share']:.0f} %)"
    return text


def _steps(r: Any) -> str:
    stats = {row["metric"]: row for row in r.stats.iter_rows(named=True)}
    row = stats.get("device_dur_ns_no_warmup") or stats.get("device_dur_ns") or stats.get("host_dur_ns")
    if row is None:
        return f"{r.steps.height} steps"
    text = f"{row['steps']} steps, median {ns(row['median_ns'])} (min {ns(row['min_ns'])}, max {ns(row['max_ns'])})"
    if r.outlier_steps:
        text += f"; outliers: {', '.join(str(s) for s in r.outlier_steps)}"
    return text


def _ops(r: Any) -> str:
    if r.ops.height == 0:
        return "no operators"
    key = "gpu_total_ns" if r.has_gpu else "host_total_ns"
    top = r.ops.sort(key, descending=True).row(0, named=True)
    return f"{r.op_calls:,} op calls; top by {'GPU' if r.has_gpu else 'host'} time: {top['name']} ({ns(top[key])})"


def _kernels(r: Any) -> str:
    text = f"{ns(r.total_ns)} in {r.distinct_names:,} distinct kernels, {r.tensor_core_pct:.0f} % on tensor cores"
    if r.families.height and "family" in r.families.columns:
        sort_by = "total_ns" if "total_ns" in r.families.columns else r.families.columns[-1]
        top = r.families.sort(sort_by, descending=True).row(0, named=True)
        text += f"; top family {top['family']}"
    return text


def _memory(r: Any) -> str:
    rows = [row for row in r.peaks.iter_rows(named=True) if row.get("peak_allocated_bytes")]
    cuda = [row for row in rows if str(row.get("device", "")).startswith(("cuda", "gpu"))] or rows
    if not cuda:
        return "no device memory events"
    text = ", ".join(f"{row['device']} peak {size(row['peak_allocated_bytes'])} allocated" for row in cuda[:2])
    if r.leaks:
        text += f"; {len(r.leaks)} possible leak(s)"
    return text


def _bound(r: Any) -> str:
    regions = r.regions
    if regions.height == 0:
        return "no regions"
    whole = regions.filter(regions["kind"] == "trace")
    head = whole.row(0, named=True) if whole.height else regions.row(0, named=True)
    text = f"whole trace {head['label']}-bound ({head['confidence']})"
    steps = regions.filter(regions["kind"] == "step")
    if steps.height:
        labels = steps["label"].value_counts(sort=True)
        text += "; steps: " + ", ".join(f"{row['label']} {row['count']}" for row in labels.iter_rows(named=True))
    return text


def _critical_path(r: Any) -> str:
    # One clause, each share with its unit: "shares: host 58.4; shares: launch 0.147" read as
    # three unrelated figures.
    shares = sorted(r.shares.items(), key=lambda kv: -kv[1])
    return "critical path: " + ", ".join(f"{kind} {value:.1f} %" for kind, value in shares)


def _compile(r: Any) -> str:
    return f"{r.compiles_in_trace} compile(s), {r.recompiles_in_trace} recompile(s), {r.regions_per_step:.1f} compiled regions per step"


_LINES: dict[str, Callable[[Any], str]] = {
    "overview": _overview,
    "breakdown": _breakdown,
    "gaps": _gaps,
    "steps": _steps,
    "ops": _ops,
    "kernels": _kernels,
    "memory": _memory,
    "bound": _bound,
    "compile": _compile,
    "critical_path": _critical_path,
}


def section_line(name: str, result: Result) -> str:
    """One line on a section: its own summary, else its first facts (a new section still gets one)."""
    if not result.available:
        return f"not available: {result.reason}"
    line = _LINES.get(name)
    if line is not None:
        try:
            return line(result)
        except (KeyError, AttributeError, IndexError, TypeError, ValueError):
            pass  # a result without the usual columns: its facts say enough
    return "; ".join(f"{k} {v}" for k, v in generic.facts(result.to_dict())[:3]) or "see --only " + name


def findings_block(result: FindingsResult, *, listed: int = MAX_FINDINGS, compact: bool = False) -> RenderableType:
    """The findings in the panel's order; ``compact``: title and saving on one line each."""
    if not result.available:
        return Text(f"not available: {result.reason}", style="yellow")
    if not result.findings:
        return Text("no material finding", style="green")
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for i, f in enumerate(result.findings[:listed], 1):
        if compact:
            grid.add_row(f"{i}.", Text.assemble((f.title, "bold"), (f"  [{f.id}] {f.saving_pct:.1f} %, {f.confidence}", "dim")))
            continue
        grid.add_row(f"{i}.", Text.assemble((f.title, "bold"), (f"  [{f.id}]", "dim")))
        grid.add_row("", Text(f"saves {saving_text(f, result)}; confidence {f.confidence}"))
    more = len(result.findings) - listed
    parts: list[RenderableType] = [grid]
    if more > 0:
        parts.append(Text(f"… {more} more finding(s): --only findings", style="dim"))
    return Group(*parts)


# The first screen: 80 columns by 50 lines.
SCREEN_LINES = 50


def glance_renderable(report: Report, *, narrow: bool = False, width: int | None = None, lines: int = SCREEN_LINES) -> RenderableType:
    """Verdict, findings, one line per section, and how to see more.

    With ``width``, the screen is laid out to fit ``lines`` lines at that width: a long verdict
    (a window that is not steady state, a job's rank) first folds the findings to a line each,
    then lists fewer of them (the rest counted, the panel's order kept)."""
    layouts = [(MAX_FINDINGS, False), (MAX_FINDINGS, True), (3, True), (1, True)]
    out: RenderableType = Group()
    for listed, compact in layouts if width else layouts[:1]:
        out = _glance(report, narrow=narrow, listed=listed, compact=compact)
        if width is None or _height(out, width) <= lines:
            break
    return out


def _height(renderable: RenderableType, width: int) -> int:
    console = text_console(io.StringIO(), width)
    return len(console.render_lines(renderable, console.options, pad=False))


def _glance(report: Report, *, narrow: bool, listed: int, compact: bool) -> RenderableType:
    parts: list[RenderableType] = [headline_renderable(report.headline, narrow=narrow)]
    sections = ordered(report.sections)
    for _name, result in sections:
        if isinstance(result, FindingsResult):
            parts.append(panel(findings_block(result, listed=listed, compact=compact), "[bold]Findings[/bold]", narrow=narrow))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    others = [(name, result) for name, result in sections if not isinstance(result, FindingsResult)]
    for name, result in others:
        grid.add_row(name, section_line(name, result))
    if others:
        parts.append(panel(grid, "[bold]Sections[/bold]", narrow=narrow))
    example = others[0][0] if others else "findings"
    parts.append(
        Text(
            f"The whole report: --full (piped or written to a file it is always whole). "
            f"One section: --only NAME (a name above, e.g. --only {example}).",
            style="dim",
        )
    )
    return Group(*parts)
