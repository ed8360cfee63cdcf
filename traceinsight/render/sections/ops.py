"""Terminal view of the ops section."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.sections.ops import CPU_HEAVY_RATIO, OpsResult
from traceinsight.render import views
from traceinsight.render.fit import Cell, Col, FitTable, shorten_middle
from traceinsight.render.html.figures import ops_figures
from traceinsight.render.units import ns

TOP_N = 15


def compact_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    *,
    names: int = 1,
    left: int = 0,
    title: str | None = None,
    styles: Sequence[str | None] | None = None,
) -> FitTable:
    """A borderless table whose first ``names`` columns (long names) are shortened in the
    middle when space is short, while the figures keep their full width; the ``left`` columns
    after the names are short labels, left-aligned. Too narrow for that: one block per row."""
    cols = [
        Col(h, "name" if i < names else ("label" if i < names + left else "num"))
        for i, h in enumerate(headers)
    ]
    return FitTable(cols, rows, title=title, row_styles=styles)


def _short(text: str | None, width: int = 40) -> str:
    if not text:
        return ""
    return shorten_middle(text, width)


def render_terminal(result: OpsResult) -> RenderableType:
    ops = result.ops
    head = Text(
        f"{result.op_calls:,} op calls, {ops.height:,} distinct "
        + ("op/shape pairs" if result.by_shapes else "ops")
        + f"; top-level op time {ns(result.top_level_host_ns)}"
    )
    parts: list[RenderableType] = [head]
    if result.has_gpu and result.unattributed_gpu_ns:
        outside = result.unattributed_gpu_ns - result.unlinked_gpu_ns
        why = []
        if result.unlinked_gpu_ns:
            why.append(f"{ns(result.unlinked_gpu_ns)} launched before recording started")
        if outside:
            why.append(f"{ns(outside)} launched outside any op")
        parts.append(Text(f"GPU time not attributed to an op: {'; '.join(why)}", style="dim"))
    headers = ["op"] + (["input dims"] if result.by_shapes else [])
    headers += ["calls", "host total", "host self", "GPU total", "GPU self", "GPU/CPU", ""]
    rows = []
    styles: list[str | None] = []
    for row in ops.head(TOP_N).iter_rows(named=True):
        ratio = row["gpu_cpu_ratio"]
        flags = (["CPU"] if row["cpu_heavy"] else []) + (["top"] if row["top_level"] else [])
        cells = [row["name"]] + ([row["input_dims"] or ""] if result.by_shapes else [])
        cells += [
            f"{row['calls']:,}",
            ns(row["host_total_ns"]),
            ns(row["host_self_ns"]),
            ns(row["gpu_total_ns"]) if result.has_gpu else "-",
            ns(row["gpu_self_ns"]) if result.has_gpu else "-",
            "-" if ratio is None else f"{ratio:.2f}",
            ",".join(flags),
        ]
        rows.append(cells)
        styles.append("yellow" if row["cpu_heavy"] else None)
    parts.append(compact_table(headers, rows, names=2 if result.by_shapes else 1, styles=styles))
    if ops.height > TOP_N:
        parts.append(Text(f"… {ops.height - TOP_N:,} more (see --format json)", style="dim"))
    parts.append(
        Text("GPU total includes the kernels of every op beneath; top = called at top level", style="dim")
    )
    heavy = ops.filter(pl.col("cpu_heavy"))
    if result.has_gpu and heavy.height:
        names = ", ".join(_short(n) for n in heavy.sort("host_self_ns", descending=True)["name"].head(5))
        parts.append(
            Text(
                f"{heavy.height} CPU-heavy op(s) (GPU time < {CPU_HEAVY_RATIO:.0%} of host time, host time "
                f"≥ {ns(result.cpu_heavy_min_host_ns)}); most self time: {names}",
                style="yellow",
            )
        )
    elif not result.has_gpu:
        parts.append(Text("no GPU activity in this trace: host times only", style="dim"))
    return Group(*parts)


views.register(OpsResult, terminal=render_terminal, figures=ops_figures)
