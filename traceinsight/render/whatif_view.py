"""Terminal view of ``traceinsight whatif``: step time before and after, the critical path after."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.whatif.model import RECORDED, WhatIfResult
from traceinsight.render.fit import Cell, Col, FitTable
from traceinsight.render.sections.critical_path import breakdown_table
from traceinsight.render.units import ns, pct


def _skewed(result: WhatIfResult) -> bool:
    """The mean and the median step differ by more than 5 %: both are worth showing."""
    return result.steady_before_ns > 0 and abs(result.before_ns - result.steady_before_ns) > 0.05 * result.steady_before_ns


def render_terminal(result: WhatIfResult) -> RenderableType:
    if not result.available:
        return Text(f"what-if not available: {result.reason}", style="yellow")
    changes = "; ".join(str(t["description"]) for t in result.transformations) or "no change"
    if result.findings:
        changes = f"the changes of {' + '.join(result.findings)} ({changes})"
    head = Text.assemble(
        ("what if: ", "bold"), changes, "\n",
        *((("before: ", "bold"), result.before, "\n") if result.before != RECORDED else ()),
        ("step time ", "bold"), f"{ns(result.steady_before_ns)} → {ns(result.steady_after_ns)}",
        f"  ({pct(result.steady_saving_pct, 1)} saved, median step)"
        if result.steady_saving_pct >= 0
        else f"  ({pct(-result.steady_saving_pct, 1)} slower, median step)",
        ("\n" + f"mean step {ns(result.before_ns)} → {ns(result.after_ns)} (a first step that drains a queue built "
         "before the trace weighs on the mean)") if _skewed(result) else "",
    )
    rows: list[Sequence[Cell]] = [
        (str(r["step"]) if r["step"] != -1 else "trace", ns(r["before_ns"]), ns(r["after_ns"]), ns(r["saving_ns"]))
        for r in result.steps.iter_rows(named=True)
    ]
    steps = FitTable([Col("step"), Col("before"), Col("after"), Col("saved")], rows)
    parts: list[RenderableType] = [head, steps, Text("critical path after the change, share by kind:"),
                                   breakdown_table(result.critical_after.to_dicts(), with_check=False)]
    if result.path_after.height:
        top = (
            result.path_after.group_by("kind", "name").agg(pl.col("dur_ns").sum())
            .sort(["dur_ns", "kind", "name"], descending=[True, False, False]).head(8)
        )
        parts.append(FitTable([Col("kind"), Col("on the path", "label", max_width=60), Col("time")],
                              [(r["kind"], str(r["name"])[:80], ns(r["dur_ns"])) for r in top.iter_rows(named=True)],
                              title="largest pieces after"))
    if not result.explained:
        parts.append(Text("the replay does not reproduce this trace's recorded steps within 5 %: treat the prediction with care", style="yellow"))
    parts += [Text(n, style="yellow") for n in result.notes]
    return Group(*parts)
