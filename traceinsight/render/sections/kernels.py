"""Terminal view of the kernels section."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.sections.kernels import KernelsResult
from traceinsight.render import views
from traceinsight.render.fit import shorten_middle
from traceinsight.render.html.figures import kernels_figures
from traceinsight.render.labels import LABEL_WIDTH, kernel_label
from traceinsight.render.sections.ops import compact_table
from traceinsight.render.units import ns, pct

TOP_N = 15


# Inductor's own prefixes are shorter than the subfamily names and known to its users.
_SUBFAMILY_LABELS = {
    "pointwise": "poi",
    "reduction": "red",
    "persistent_reduction": "per",
    "template": "tem",
    "foreach": "for",
}


def _launch(result: KernelsResult) -> RenderableType:
    s = result.launch
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    grid.add_row(
        "kernels",
        f"{s.kernels:,} ({s.linked:,} linked to a launch call"
        + (f", {s.unlinked:,} not" if s.unlinked else "")
        + f"); {result.distinct_names:,} distinct names",
    )
    grid.add_row("kernel duration", f"mean {ns(s.kernel_mean_ns)}, median {ns(s.kernel_p50_ns)}")
    grid.add_row("CPU launch time", f"mean {ns(s.launch_cpu_mean_ns)}, median {ns(s.launch_cpu_p50_ns)}")
    if s.latency_measured:
        clamped = f" ({s.negative_latency_clamped:,} negative, clamped to 0)" if s.negative_latency_clamped else ""
        grid.add_row(
            "launch latency",
            f"median {ns(s.latency_p50_ns)}, p95 {ns(s.latency_p95_ns)}, max {ns(s.latency_max_ns)}{clamped}",
        )
    if s.linked:
        grid.add_row(
            "shorter than launch",
            f"{s.shorter_than_launch:,} kernels ({pct(s.shorter_than_launch_pct)}) ran for less time "
            "than the CPU took to launch them",
        )
    if s.graph_kernels:
        share = f", {pct(100.0 * s.graph_kernel_ns / result.total_ns)} of kernel time" if result.total_ns else ""
        grid.add_row(
            "graph replays",
            f"{s.graph_kernels:,} kernels ({ns(s.graph_kernel_ns)}{share}) from {s.graph_launches:,} graph launch calls",
        )
    grid.add_row("tensor cores", f"{pct(result.tensor_core_pct)} of kernel time (by kernel name; heuristic)")
    return grid


def _graphs(result: KernelsResult) -> RenderableType | None:
    if result.graphs.height == 0:
        return None
    with_ops = result.graphs["top_op"].is_not_null().any()
    rows = [
        [
            f"#{r['graph']}",
            f"{r['launches']:,}",
            f"{r['kernels_per_launch']:,}",
            ns(r["per_launch_ns"]),
            ns(r["total_ns"]),
            pct(r["share_pct"]),
            # generated library kernels (ROCm's Tensile) carry names of hundreds of characters
            f"{shorten_middle(kernel_label(r['top_kernel']), LABEL_WIDTH)} ({pct(r['top_kernel_pct'], 0)})",
            *([f"{r['top_op']} ({pct(r['top_op_pct'], 0)})" if r["top_op"] else "-"] if with_ops else []),
        ]
        for r in result.graphs.iter_rows(named=True)
    ]
    headers = ["graph", "launches", "kernels", "per launch", "total", "share", "largest kernel"]
    if with_ops:
        headers.append("largest op (from the capture)")
    return compact_table(headers, rows, title="graphs replayed (told apart by the kernels one launch runs)")


def render_terminal(result: KernelsResult) -> RenderableType:
    parts: list[RenderableType] = [_launch(result)]
    graphs = _graphs(result)
    if graphs is not None:
        parts.append(graphs)
    fam_rows = [
        [
            row["family"],
            f"{row['kernels']:,}",
            f"{row['names']:,}",
            ns(row["total_ns"]),
            pct(row["share_pct"]),
            ns(row["mean_ns"]),
            ns(row["tensor_core_ns"]) if row["tensor_core_ns"] else "-",
            pct(row["short_pct"]),
        ]
        for row in result.families.iter_rows(named=True)
    ]
    headers = ["family", "kernels", "names", "total", "share", "mean", "tensor-core", "short"]
    parts.append(compact_table(headers, fam_rows, title="by family"))
    if result.subfamilies.height:
        sub = ", ".join(
            f"{r['family']}/{r['subfamily']} {ns(r['total_ns'])} ({r['kernels']:,})"
            for r in result.subfamilies.iter_rows(named=True)
        )
        parts.append(Text(f"subfamilies: {sub}", style="dim"))
    rows = []
    for row in result.kernels.head(TOP_N).iter_rows(named=True):
        sub = _SUBFAMILY_LABELS.get(row["subfamily"], row["subfamily"])
        family = row["family"] if sub is None else f"{row['family']}/{sub}"
        rows.append(
            [
                kernel_label(row["name"]),
                family,
                "TC" if row["tensor_core"] else "",
                f"{row['calls']:,}",
                ns(row["total_ns"]),
                pct(row["share_pct"]),
                ns(row["mean_ns"]),
                row["grid"] or "-",
                row["block"] or "-",
                pct(row["occupancy_pct"], 0),
            ]
        )
    headers = ["kernel", "family", "", "calls", "total", "share", "mean", "grid", "block", "occ."]
    parts.append(compact_table(headers, rows, left=2, title="top kernels (TC: uses tensor cores, by name)"))
    if result.kernels.height > TOP_N:
        parts.append(Text(f"… {result.kernels.height - TOP_N:,} more (see --format json)", style="dim"))
    return Group(*parts)


def render_markdown(result: KernelsResult) -> list[str]:
    from traceinsight.render.markdown import generic_lines, md_table, name_cell

    lines = generic_lines(result)
    if result.graphs.height:
        with_ops = bool(result.graphs["top_op"].is_not_null().any())
        headers = ["graph", "launches", "kernels", "per launch", "total", "share", "largest kernel"]
        if with_ops:
            headers.append("largest op (from the capture)")
        rows = [
            (
                f"#{r['graph']}", f"{r['launches']:,}", f"{r['kernels_per_launch']:,}", ns(r["per_launch_ns"]),
                ns(r["total_ns"]), pct(r["share_pct"]),
                f"{name_cell(r['top_kernel'])} ({pct(r['top_kernel_pct'], 0)})",
                *([f"`{r['top_op']}` ({pct(r['top_op_pct'], 0)})" if r["top_op"] else "-"] if with_ops else []),
            )
            for r in result.graphs.iter_rows(named=True)
        ]
        lines.extend(["Graphs replayed (told apart by the kernels one launch runs):", "", md_table(headers, rows), ""])
    return lines


def render_html(result: KernelsResult) -> str:
    from html import escape

    from traceinsight.render.html.page import result_html, table_html

    body = result_html(result, kernels_figures(result) if result.available else [])
    if not result.available or result.graphs.height == 0:
        return body
    with_ops = bool(result.graphs["top_op"].is_not_null().any())
    headers = ["graph", "launches", "kernels", "per launch", "total", "share", "largest kernel"]
    if with_ops:
        headers.append("largest op (from the capture)")
    rows = [
        [
            f"#{r['graph']}", f"{r['launches']:,}", f"{r['kernels_per_launch']:,}", ns(r["per_launch_ns"]),
            ns(r["total_ns"]), pct(r["share_pct"]), f"{r['top_kernel']} ({pct(r['top_kernel_pct'], 0)})",
            *([f"{r['top_op']} ({pct(r['top_op_pct'], 0)})" if r["top_op"] else "-"] if with_ops else []),
        ]
        for r in result.graphs.iter_rows(named=True)
    ]
    title = escape("Graphs replayed (told apart by the kernels one launch runs)")
    return body + f"<h3>{title}</h3>" + table_html(headers, rows)


views.register(KernelsResult, terminal=render_terminal, markdown=render_markdown, html=render_html, figures=kernels_figures)
