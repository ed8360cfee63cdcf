"""Terminal view of the torch.compile section."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.compile import CompileResult
from traceinsight.render.units import ns


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def render_terminal(result: CompileResult) -> RenderableType:
    unit = "step" if result.per_step else "trace"
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    frames = ", ".join(str(f) for f in result.frames) or "-"
    recompiled = ", ".join(str(f) for f in result.recompiled_frames)
    head.add_row("Dynamo frames", frames + (f" (recompiled: {recompiled})" if recompiled else ""))
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
        table = Table(title="compiled regions", box=None, title_justify="left")
        table.add_column("kind", no_wrap=True)
        table.add_column("name", overflow="ellipsis", no_wrap=True, max_width=48)
        table.add_column(f"calls /{unit}", justify="right")
        table.add_column(f"host /{unit}", justify="right")
        table.add_column(f"kernels /{unit}", justify="right")
        table.add_column(f"GPU /{unit}", justify="right")
        for row in result.regions.iter_rows(named=True):
            kernels = row["kernels_per_step"]
            table.add_row(
                row["kind"],
                _short(row["name"]),
                f"{row['calls_per_step']:.1f}",
                ns(row["host_ns_per_step"]),
                "-" if kernels is None else f"{kernels:.0f}",
                ns(row["kernel_ns_per_step"]),
            )
        parts.append(table)
    if result.graph_break_ops.height:
        table = Table(title="eager ops inside compiled frames (graph breaks)", box=None, title_justify="left")
        table.add_column("op")
        table.add_column(f"calls /{unit}", justify="right")
        table.add_column(f"host /{unit}", justify="right")
        for row in result.graph_break_ops.head(10).iter_rows(named=True):
            table.add_row(_short(row["name"]), f"{row['calls_per_step']:.1f}", ns(row["host_ns_per_step"]))
        parts.append(table)
    if result.compile_events.height:
        table = Table(title="compiles inside the trace", box=None, title_justify="left")
        table.add_column("kind")
        table.add_column("function")
        table.add_column("compile id")
        table.add_column("step", justify="right")
        table.add_column("duration", justify="right")
        for row in result.compile_events.iter_rows(named=True):
            table.add_row(
                row["kind"], row["fn_name"] or "?", row["compile_id"] or "?",
                "-" if row["step"] is None else str(row["step"]), ns(row["dur_ns"]),
            )
        parts.append(table)
    for line in result.findings:
        parts.append(Text(f"• {line}"))
    return Group(*parts)
