"""Terminal view of the torch.compile section."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.units import ns


def render_terminal(result: CompileResult) -> RenderableType:
    unit = "step" if result.per_step else "trace"
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    frames = ", ".join(str(f) for f in result.frames) or "-"
    recompiled = ", ".join(str(f) for f in result.recompiled_frames)
    # The ids are frame numbers, not counts: "(recompiled: 0)" beside "5 recompiles" misread.
    head.add_row("Dynamo frame ids", frames + (f" (recompiled: frame {recompiled})" if len(result.recompiled_frames) == 1 else f" (recompiled: frames {recompiled})" if recompiled else ""))
    head.add_row(
        "compiles in trace",
        f"{result.compiles_in_trace} ({ns(result.compile_ns)} of host time; {result.recompiles_in_trace} recompile(s))"
        if result.compiles_in_trace
        else "none (compiled before the profiled window)",
    )
    head.add_row(f"compiled regions /{unit}", f"{result.regions_per_step:.1f}")
    head.add_row(
        f"kernels /{unit}",
        f"{result.kernels_per_step:.0f} ({result.compiled_kernels_per_step:.0f} from compiled graphs, "
        f"{result.triton_kernels_per_step:.0f} Triton)",
    )
    share = "-" if result.triton_share is None else f"{100 * result.triton_share:.1f} %"
    head.add_row(
        f"kernel time /{unit}",
        f"{ns(result.kernel_ns_per_step)} (Triton {ns(result.triton_ns_per_step)} = {share}, "
        f"library {ns(result.library_ns_per_step)})",
    )
    head.add_row(
        f"launches /{unit}",
        f"{result.launches_per_step:.0f} calls, {ns(result.launch_api_ns_per_step)} in launch APIs"
        + (f"; {result.graph_launches_per_step:.0f} cudaGraphLaunch" if result.uses_cuda_graphs else ""),
    )
    head.add_row(
        f"Dynamo cache lookup /{unit}",
        f"{result.cache_lookups_per_step:.1f} calls, {ns(result.cache_lookup_ns_per_step)}",
    )
    if result.host_step_ns is not None:
        head.add_row("host step span (median)", ns(result.host_step_ns))
    parts: list[RenderableType] = [head]
    if result.regions.height:
        columns = [
            Col("kind", "label"), Col("name", "name"), Col(f"calls /{unit}"), Col(f"host /{unit}"),
            Col(f"kernels /{unit}"), Col(f"GPU /{unit}"),
        ]
        rows = [
            (
                row["kind"],
                row["name"],
                f"{row['calls_per_step']:.1f}",
                ns(row["host_ns_per_step"]),
                "-" if row["kernels_per_step"] is None else f"{row['kernels_per_step']:.0f}",
                ns(row["kernel_ns_per_step"]),
            )
            for row in result.regions.iter_rows(named=True)
        ]
        parts.append(FitTable(columns, rows, title="compiled regions"))
    if result.graph_break_ops.height:
        break_rows = [
            (row["name"], f"{row['calls_per_step']:.1f}", ns(row["host_ns_per_step"]))
            for row in result.graph_break_ops.head(10).iter_rows(named=True)
        ]
        parts.append(
            FitTable(
                [Col("op", "name"), Col(f"calls /{unit}"), Col(f"host /{unit}")],
                break_rows,
                title="eager ops inside compiled frames (graph breaks)",
            )
        )
    if result.compile_events.height:
        event_rows = [
            (
                row["kind"], row["fn_name"] or "?", row["compile_id"] or "?",
                "-" if row["step"] is None else str(row["step"]), ns(row["dur_ns"]),
            )
            for row in result.compile_events.iter_rows(named=True)
        ]
        parts.append(
            FitTable(
                [Col("kind", "label"), Col("function", "name"), Col("compile id", "label"), Col("step"), Col("duration")],
                event_rows,
                title="compiles inside the trace",
            )
        )
    for line in result.findings:
        parts.append(Text(f"• {line}"))
    return Group(*parts)


views.register(CompileResult, terminal=render_terminal)
