"""Terminal view of the critical path: per step, what kind of work holds it, and the replay check."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.whatif.critical import KINDS
from traceinsight.analysis.whatif.section import CriticalPathResult
from traceinsight.render import views
from traceinsight.render.fit import Cell, Col, FitTable
from traceinsight.render.units import ns, pct


def breakdown_table(steps: Sequence[dict[str, object]], *, with_check: bool) -> FitTable:
    """One row per step: length, the check against the recording, and each kind's share."""
    columns = [Col("step"), Col("length")]
    if with_check:
        columns += [Col("recorded"), Col("error")]
    columns += [Col(k) for k in KINDS]
    rows: list[Sequence[Cell]] = []
    for row in steps:
        length = int(row.get("length_ns") or 0)  # type: ignore[call-overload]
        cells: list[Cell] = [str(row["step"]) if row["step"] != -1 else "trace", ns(length)]
        if with_check:
            cells += [ns(row.get("recorded_ns")), pct(row.get("error_pct"), 2)]  # type: ignore[arg-type]
        cells += [pct(100 * int(row.get(f"{k}_ns") or 0) / length, 0) if length else "-" for k in KINDS]  # type: ignore[call-overload]
        rows.append(cells)
    return FitTable(columns, rows)


def render_terminal(result: CriticalPathResult) -> RenderableType:
    steps = result.steps.to_dicts()
    with_check = "recorded_ns" in result.steps.columns
    parts: list[RenderableType] = [
        Text("critical path = the chain of work that sets each step's length; shares of it by kind"),
        breakdown_table(steps, with_check=with_check),
    ]
    if result.top.height:
        top_rows: list[Sequence[Cell]] = [
            (r["kind"], str(r["name"])[:80], ns(r["dur_ns"]), pct(r["share_pct"], 1), str(r["pieces"]))
            for r in result.top.iter_rows(named=True)
        ]
        parts.append(FitTable([Col("kind"), Col("on the path", "label", max_width=48), Col("time"), Col("share"), Col("pieces")], top_rows, title="largest pieces"))
    style = "green" if result.explained else "yellow"
    parts.append(Text(f"replay with recorded durations: largest step error {result.max_error_pct:.2f} %", style=style))
    parts += [Text(note, style="yellow") for note in result.notes]
    return Group(*parts)


views.register(CriticalPathResult, terminal=render_terminal)
