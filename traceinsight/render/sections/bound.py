"""Terminal view of the bound section: the roofline set-up, then regions (or ops, kernels)."""

from __future__ import annotations

from typing import Literal

import polars as pl
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.bound import BoundResult
from traceinsight.render.units import ns, pct

LABEL_STYLE = {
    "overhead": "bold magenta",
    "host": "bold yellow",
    "sync": "bold red",
    "data": "bold cyan",
    "idle": "yellow",
    "compute": "bold green",
    "memory": "bold blue",
    "unclassified": "dim",
}
Justify = Literal["left", "right"]
CONFIDENCE_STYLE = {"high": "green", "medium": "yellow", "low": "red"}
# How many rows of each region kind the overview shows (the JSON output has them all).
SHOWN_PER_KIND = {"trace": 1, "step": 6, "compiled": 6, "annotation": 12, "module": 8, "op": 5}


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if value != 0 and abs(value) < 10 ** (-digits):
        return f"{value:.1e}"
    return f"{value:,.{digits}f}"


def _header(result: BoundResult) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("device", result.device_name or "?")
    if result.peaks and result.roofline_available:
        tflops = result.peaks["tflops"]
        parts = [f"{cls} {tflops[cls]:,.0f}" for cls in ("fp32", "tf32", "bf16", "fp8") if tflops.get(cls)]
        grid.add_row(
            "peaks",
            f"{', '.join(parts)} TFLOP/s; {result.peaks['mem_bw_tbps']:.2f} TB/s ({result.peaks['origin']}: {result.peaks['name']})",
        )
    else:
        grid.add_row("roofline", Text(result.roofline_reason or "unavailable", style="yellow"))
    if result.cost_coverage_pct is not None:
        grid.add_row("FLOP/byte costs", f"known for {pct(result.cost_coverage_pct, 0)} of kernel time")
    if not result.gap_causes_available:
        grid.add_row("idle causes", Text(result.gap_reason or "unavailable", style="yellow"))
    return grid


def _label(label: str | None, confidence: str | None) -> Text:
    text = Text(label or "-", style=LABEL_STYLE.get(label or "", ""))
    if confidence:
        text.append(f" ({confidence})", style=CONFIDENCE_STYLE.get(confidence, ""))
    return text


def _shown_regions(regions: pl.DataFrame) -> pl.DataFrame:
    parts = []
    for kind, limit in SHOWN_PER_KIND.items():
        rows = regions.filter(pl.col("kind") == kind)
        if kind in ("annotation", "module", "op"):
            rows = rows.sort("dur_ns", descending=True).head(limit).sort("start_ns")
        parts.append(rows.head(limit))
    return pl.concat(parts) if parts else regions


def regions_table(result: BoundResult, *, limit: int | None = None) -> Table:
    rows = _shown_regions(result.regions) if limit is None else result.regions.head(limit)
    table = Table(box=None, pad_edge=False, show_edge=False, expand=True)
    region_cols: tuple[tuple[str, Justify], ...] = (
        ("region", "left"), ("kind", "left"), ("window", "right"), ("busy", "right"), ("label", "left"),
        ("TFLOP/s", "right"), ("TB/s", "right"), ("FLOP/B", "right"), ("ridge", "right"), ("roofline", "right"),
    )
    for col, justify in region_cols:
        if col == "region":
            table.add_column(col, justify=justify, no_wrap=True, overflow="ellipsis", ratio=1, min_width=16)
        else:
            table.add_column(col, justify=justify, no_wrap=True)
    for r in rows.iter_rows(named=True):
        table.add_row(
            r["name"], r["kind"], ns(r["dur_ns"]), pct(r["busy_pct"], 0), _label(r["label"], r["confidence"]),
            _num(r["tflops"]), _num(r["tbps"], 2), _num(r["intensity"]), _num(r["ridge"]), _roof(r),
        )
    return table


def _roof(r: dict[str, object]) -> str:
    """% of roofline, marked when above 100 % (the reason is in the notes and the JSON)."""
    value = r["pct_of_roofline"]
    text = pct(value if isinstance(value, float) else None, 0)
    return text + " ↑" if r.get("above_peak_reason") else text


def evidence_lines(result: BoundResult, *, limit: int = 8) -> list[Text]:
    rows = _shown_regions(result.regions).filter(pl.col("kind") != "op").head(limit)
    lines = []
    for r in rows.iter_rows(named=True):
        line = Text(f"{r['name']}: ", style="bold")
        line.append_text(_label(r["label"], r["confidence"]))
        line.append(f" — {r['reason']}. ")
        line.append(r["evidence"] or "", style="dim")
        lines.append(line)
    return lines


# Short tags for the terminal; the full reason is in the JSON output.
_REASON_TAGS = (
    ("shorter than their launch", "kernel < launch"),
    ("guessed from kernel families", "family guess"),
    ("latency/occupancy-limited", "far below roof"),
    ("close to the ridge", "near ridge"),
    ("costs known for", "partly costed"),
)


def short_name(name: str, width: int = 48) -> str:
    """A kernel or op name cut to fit one table cell: no ``void``, no argument list."""
    text = name.removeprefix("void ")
    cut = text.find("(")
    if cut > 0:
        text = text[:cut]
    return text if len(text) <= width else text[: width - 1] + "…"


def _tags(reason: str | None) -> str:
    return ", ".join(tag for needle, tag in _REASON_TAGS if reason and needle in reason)


def group_table(frame: pl.DataFrame, *, what: str, limit: int) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, expand=True)
    group_cols: tuple[tuple[str, Justify], ...] = (
        (what, "left"), ("calls", "right"), ("GPU time", "right"), ("label", "left"), ("TFLOP/s", "right"),
        ("TB/s", "right"), ("FLOP/B", "right"), ("roofline", "right"), ("dtype", "left"), ("note", "left"),
    )
    for col, justify in group_cols:
        if col == what:  # the name takes whatever width the figures leave
            table.add_column(col, justify=justify, no_wrap=True, overflow="ellipsis", ratio=1, min_width=24)
        elif col == "note":
            table.add_column(col, justify=justify, no_wrap=True, overflow="ellipsis", max_width=16)
        else:
            table.add_column(col, justify=justify, no_wrap=True)
    for r in frame.head(limit).iter_rows(named=True):
        name = short_name(r["name"]) if not r.get("shapes") else f"{r['name']} {short_name(r['shapes'], 40)}"
        table.add_row(
            name, f"{r['calls']:,}", ns(r["kernel_ns"]), _label(r["label"], r["confidence"]), _num(r["tflops"]),
            _num(r["tbps"], 2), _num(r["intensity"]), _roof(r), r["dtype_class"] or "-", _tags(r["reason"]),
        )
    return table


def render_by(result: BoundResult, by: str, *, limit: int = 20) -> RenderableType:
    """The table for ``--by region|op|kernel`` under the same header."""
    parts: list[RenderableType] = [_header(result)]
    if by == "region":
        parts.append(regions_table(result))
        parts.extend(evidence_lines(result, limit=limit))
    else:
        frame = result.table(by)
        parts.append(group_table(frame, what=by, limit=limit))
        if frame.height > limit:
            parts.append(Text(f"... {frame.height - limit} more (see --format json)", style="dim"))
    notes = [n for n in result.notes if by == "region" or "not listed as regions" not in n]
    parts.extend(Text(f"note: {note}", style="dim") for note in notes)
    return Group(*parts)


def render_terminal(result: BoundResult) -> RenderableType:
    return render_by(result, "region", limit=8)
