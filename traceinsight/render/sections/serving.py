"""Terminal and Markdown views of the serving section."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from traceinsight.analysis.sections.serving import ServingResult
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.units import ns

MAX_ROWS = 12


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _rows(result: ServingResult) -> list[tuple[str, ...]]:
    return [
        (
            str(r["iteration"]), r["phase"], _count(r["requests"]), _count(r["tokens"]), _count(r["kv_tokens"]),
            ns(r["latency_ns"]), ns(r["device_ns"]), _rate(r["tokens_per_s"]),
        )
        for r in result.iterations.head(MAX_ROWS).iter_rows(named=True)
    ]


HEADERS = ("iteration", "phase", "requests", "tokens", "KV tokens", "latency", "device work", "tokens/s")


def render_terminal(result: ServingResult) -> RenderableType:
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    n = result.iterations.height
    head.add_row("iterations", f"{n:,} from {result.engine_format}")
    head.add_row(
        "throughput",
        f"{_count(result.tokens)} tokens in {ns(result.latency_ns)} of iteration latency: {_rate(result.tokens_per_s)} tokens/s"
        if result.tokens_per_s is not None
        else f"{ns(result.latency_ns)} of iteration latency (the annotations give no token counts)",
    )
    columns = [Col(h) if i else Col(h, "label") for i, h in enumerate(HEADERS)]
    table = FitTable(columns, _rows(result), title="iterations" + (f" (first {MAX_ROWS} of {n:,})" if n > MAX_ROWS else ""))
    return Group(head, table)


def render_markdown(result: ServingResult) -> list[str]:
    from traceinsight.render.markdown import md_table

    lines = [f"{result.iterations.height:,} iterations from {result.engine_format}."]
    if result.tokens_per_s is not None:
        lines.append(f"{_count(result.tokens)} tokens in {ns(result.latency_ns)} of iteration latency: {_rate(result.tokens_per_s)} tokens/s.")
    return [*lines, "", md_table(HEADERS, _rows(result)), ""]


views.register(ServingResult, terminal=render_terminal, markdown=render_markdown)
