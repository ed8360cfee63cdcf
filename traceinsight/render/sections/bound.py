"""Terminal view of the bound section: the roofline set-up, then regions (or ops, kernels)."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable, shorten_middle
from traceinsight.render.html.figures import bound_figures
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
    grid.add_column(overflow="fold")
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


# One row per region: the figures behind its label (the label's reason and the evidence in
# words are in the JSON). Narrow, the kind goes; narrower, each region's figures stack under
# its name. Every figure stays at every width.
REGION_COLUMNS = (
    Col("region", "name"), Col("kind", "label", optional=True), Col("window"), Col("GPU busy"),
    Col("busy"), Col("label", "label"), Col("TFLOP/s"), Col("TB/s"), Col("FLOP/B"), Col("ridge"), Col("roofline"),
)


def region_names(names: list[str]) -> list[str]:
    """Region names, each repeated one numbered (``Optimizer.step (2 of 5)``), so that the
    rows of a region seen once a step never read the same."""
    total: dict[str, int] = {}
    for name in names:
        total[name] = total.get(name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(f"{name} ({seen[name]} of {total[name]})" if total[name] > 1 else name)
    return out


def regions_table(result: BoundResult, *, limit: int | None = None) -> FitTable:
    """One row per region: its figures and its label, in one form."""
    rows = _shown_regions(result.regions)
    if limit is not None:
        rows = rows.head(limit)
    records = list(rows.iter_rows(named=True))
    names = region_names([r["name"] for r in records])
    cells = [
        (
            name, r["kind"], ns(r["dur_ns"]), ns(r["busy_ns"]), pct(r["busy_pct"], 0), _label(r["label"], r["confidence"]),
            _num(r["tflops"]), _num(r["tbps"], 2), _num(r["intensity"]), _num(r["ridge"]), _roof(r),
        )
        for name, r in zip(names, records, strict=True)
    ]
    return FitTable(REGION_COLUMNS, cells)


def _roof(r: dict[str, object]) -> str:
    """% of roofline, marked when above 100 % (the reason is in the notes and the JSON)."""
    value = r["pct_of_roofline"]
    text = pct(value if isinstance(value, float) else None, 0)
    return text + " ↑" if r.get("above_peak_reason") else text


# Short tags for the terminal; the full reason is in the JSON output.
_REASON_TAGS = (
    ("shorter than their launch", "kernel < launch"),
    ("guessed from kernel families", "family guess"),
    ("latency/occupancy-limited", "far below roof"),
    ("close to the ridge", "near ridge"),
    ("costs known for", "partly costed"),
)


def short_name(name: str, width: int = 72) -> str:
    """A kernel or op name for one table cell: no ``void``, no argument list, its middle
    dropped when still too long (the tail tells similar kernels apart)."""
    text = name.removeprefix("void ")
    cut = text.find("(")
    if cut > 0:
        text = text[:cut]
    return shorten_middle(text, width)


def _tags(reason: str | None) -> str:
    return ", ".join(tag for needle, tag in _REASON_TAGS if reason and needle in reason)


def group_table(frame: pl.DataFrame, *, what: str, limit: int) -> FitTable:
    columns = (
        Col(what, "name"), Col("calls"), Col("GPU time"), Col("label", "label"), Col("TFLOP/s"),
        Col("TB/s"), Col("FLOP/B"), Col("roofline"), Col("dtype", "label"), Col("note", "label"),
    )
    cells = []
    for r in frame.head(limit).iter_rows(named=True):
        name = short_name(r["name"]) if not r.get("shapes") else f"{r['name']} {short_name(r['shapes'], 40)}"
        cells.append((
            name, f"{r['calls']:,}", ns(r["kernel_ns"]), _label(r["label"], r["confidence"]), _num(r["tflops"]),
            _num(r["tbps"], 2), _num(r["intensity"]), _roof(r), r["dtype_class"] or "-", _tags(r["reason"]),
        ))
    return FitTable(columns, cells)


def render_by(result: BoundResult, by: str, *, limit: int = 20, all_regions: bool = False) -> RenderableType:
    """The table for ``--by region|op|kernel`` under the same header; ``limit`` rows (the
    report's own view, ``all_regions``, shows every kind of region instead)."""
    parts: list[RenderableType] = [_header(result)]
    if by == "region":
        # One form per region: the table row carries the label's reason; the full evidence
        # (kernel counts, exact windows) is in the JSON output.
        parts.append(regions_table(result, limit=None if all_regions else limit))
    else:
        frame = result.table(by)
        parts.append(group_table(frame, what=by, limit=limit))
        if frame.height > limit:
            parts.append(Text(f"... {frame.height - limit} more (see --format json)", style="dim"))
    notes = [n for n in result.notes if by == "region" or "not listed as regions" not in n]
    parts.extend(Text(f"note: {note}", style="dim") for note in notes)
    return Group(*parts)


def render_terminal(result: BoundResult) -> RenderableType:
    return render_by(result, "region", limit=8, all_regions=True)


views.register(BoundResult, terminal=render_terminal, figures=bound_figures)
