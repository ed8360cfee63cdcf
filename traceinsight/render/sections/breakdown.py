"""Terminal view of the device time breakdown."""

from __future__ import annotations

import polars as pl
from rich.console import Group, RenderableType
from rich.text import Text

from traceinsight.analysis.sections.breakdown import BreakdownResult, group_of
from traceinsight.render import views
from traceinsight.render.fit import Col, FitTable
from traceinsight.render.html.figures import breakdown_figures
from traceinsight.render.units import ns, pct

_STYLES = {"compute": "green", "communication": "magenta", "memcpy": "cyan", "memset": "blue", "idle": "yellow"}
_BAR_WIDTH = 30


def _bar(share: float, category: str) -> Text:
    filled = round(share * _BAR_WIDTH)
    return Text("█" * filled, style=_STYLES.get(group_of(category), ""))


def render_terminal(result: BreakdownResult) -> RenderableType:
    parts: list[RenderableType] = [Text(f"window {ns(result.window_ns)}; each instant counted once (compute > communication > memcpy > memset)")]
    summary = {row["device"]: row for row in result.devices.iter_rows(named=True)}
    for device in result.by_device["device"].unique().sort().to_list():
        rows = result.by_device.filter(pl.col("device") == device)
        table = FitTable(
            [Col("category", "label"), Col("time"), Col("share"), Col("", "label")],
            [
                (row["category"], ns(row["dur_ns"]), pct(100 * row["share"]), _bar(row["share"], row["category"]))
                for row in rows.iter_rows(named=True)
            ],
            title=f"GPU {device}",
        )
        parts.append(table)
        info = summary.get(device)
        if info is not None:
            parts.append(
                Text(
                    f"busy {pct(100 * info['busy_share'])} of the window; "
                    f"{pct(100 * info['active_busy_share'])} from its first to its last GPU work ({ns(info['active_ns'])})",
                    style="dim",
                )
            )
    streams = result.by_stream.filter(pl.col("category") != "idle")
    if streams.height:
        table = FitTable(
            [Col("GPU"), Col("stream"), Col("category", "label"), Col("time"), Col("share")],
            [
                (str(row["device"]), str(row["stream"]), row["category"], ns(row["dur_ns"]), pct(100 * row["share"]))
                for row in streams.iter_rows(named=True)
            ],
            title="per stream (each on its own)",
        )
        parts.append(table)
    return Group(*parts)


views.register(BreakdownResult, terminal=render_terminal, figures=breakdown_figures)
