"""Per-section figures of the HTML report: plots where a picture beats a table.

Each builder takes its section's concrete result type and reads its fields and columns by
name, so a renamed field fails type checking or the tests instead of drawing nothing.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.kernels import KernelsResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.render import svg
from traceinsight.render.html.page import Figure
from traceinsight.render.html.styles import BOUND_COLORS, CATEGORY_COLORS
from traceinsight.render.units import ns


def breakdown_figures(result: BreakdownResult) -> list[Figure]:
    frame = result.by_device
    if frame.height == 0:
        return []
    rows = []
    for (device,), part in frame.group_by("device", maintain_order=True):
        parts = [(str(c), float(s or 0.0) * 100.0) for c, s in part.select("category", "share").iter_rows()]
        rows.append((f"GPU {device}", parts))
    colors = {c: CATEGORY_COLORS.get(c.split("_", 1)[0], svg.color(i + 1)) for i, c in enumerate(frame["category"].unique().sort().to_list())}
    return [Figure("Device time by category", svg.stacked_hbars(rows, colors=colors, label="device time breakdown"))]


def kernels_figures(result: KernelsResult) -> list[Figure]:
    figures = []
    frame = result.kernels
    if frame.height:
        top = frame.sort("total_ns", descending=True).head(15)
        items = [
            (str(r["name"]), (r["total_ns"] or 0) / 1e6, f"{r['name']}: {ns(r['total_ns'])} in {r['calls']:,} calls")
            for r in top.iter_rows(named=True)
        ]
        figures.append(Figure("Top kernels by GPU time", svg.hbars(items, value_label="total GPU time, ms", fmt="{:.2f} ms", label="top kernels")))
    fam = result.families
    if fam.height:
        items = [(str(f), (t or 0) / 1e6, f"{f}: {ns(t)}") for f, t in fam.sort("total_ns", descending=True).head(12).select("family", "total_ns").iter_rows()]
        figures.append(Figure("GPU time by kernel family", svg.hbars(items, value_label="total GPU time, ms", fmt="{:.2f} ms", label="kernel families", label_chars=24)))
    return figures


def ops_figures(result: OpsResult) -> list[Figure]:
    frame = result.ops
    # Without GPU work every op's GPU time is 0: rank by host time instead.
    value, what = ("gpu_total_ns", "GPU") if result.has_gpu else ("host_total_ns", "host")
    top = frame.filter(pl.col(value) > 0).sort(value, descending=True).head(15)
    items = [(str(n), (v or 0) / 1e6, f"{n}: {ns(v)}") for n, v in top.select("name", value).iter_rows()]
    return [Figure(f"Top operators by {what} time", svg.hbars(items, value_label=f"{what} time, ms", fmt="{:.2f} ms", label="top operators"))] if items else []


STEP_PARTS = (("kernel_ns", "kernels"), ("memcpy_ns", "memcpy"), ("memset_ns", "memset"), ("communication_ns", "communication"))


def steps_figures(result: StepsResult) -> list[Figure]:
    frame = result.steps
    if not frame.height:
        return []
    dur = "device_dur_ns"
    parts = [(c, n) for c, n in STEP_PARTS if (frame[c].fill_null(0) > 0).any()]
    if parts:
        busy = pl.sum_horizontal([pl.col(c).fill_null(0) for c, _ in parts])
        data = frame.select("step", *[c for c, _ in parts], idle=(pl.col(dur) - busy).clip(lower_bound=0))
        series = [n for _, n in parts] + ["GPU idle"]
        colors = [svg.color(i) for i in range(len(parts))] + ["#e15759"]
        items = [(f"#{row[0]}", [(v or 0) / 1e6 for v in row[1:]]) for row in data.iter_rows()]
    else:
        series, colors = ["step time"], [svg.color(0)]
        items = [(f"#{s}", [(d or 0) / 1e6]) for s, d in frame.select("step", dur).iter_rows()]
    chart = svg.columns(items, series=series, colors=colors, y_label="ms", label="step times")
    return [Figure("Step time on the device", chart, "Each column is one step from its start to the end of the GPU work it launched; red is GPU idle time inside the step.")]


REGION_LEVELS = ("annotation", "step", "trace")


def bound_figures(result: BoundResult) -> list[Figure]:
    """Roofline: the named regions and the heaviest kernels against the device's roofs."""
    regions = result.regions
    kernels = result.kernels
    level = next((k for k in REGION_LEVELS if (regions["kind"] == k).any()), None)
    regions = regions.filter(pl.col("kind") == level) if level else regions
    points: list[svg.Point] = [
        svg.Point(x, y, f"region {n}", str(lab)) for n, lab, x, y in regions.select("name", "label", "intensity", "tflops").iter_rows()
        if x and y and x > 0 and y > 0
    ]
    top = kernels.sort("kernel_ns", descending=True, nulls_last=True).head(30)
    points += [
        svg.Point(x, y, f"kernel {n}", str(lab)) for n, lab, x, y in top.select("name", "label", "intensity", "tflops").iter_rows()
        if x and y and x > 0 and y > 0
    ]
    if not points:
        return []
    roofs: list[tuple[str, float, float]] = []
    peaks = result.peaks
    if isinstance(peaks, dict) and isinstance(peaks.get("mem_bw_tbps"), (int, float)):
        bw = float(peaks["mem_bw_tbps"])
        classes = peaks.get("tflops") or {}
        seen = kernels["dtype_class"].drop_nulls().unique().to_list()
        wanted = [c for c in ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64") if c in seen] or ["bf16", "fp32"]
        # TB/s × FLOP/B = TFLOP/s: the memory roof's slope is the bandwidth in TB/s.
        roofs = [(c, float(classes[c]), bw) for c in wanted if isinstance(classes.get(c), (int, float))][:3]
    chart = svg.loglog_scatter(points, roofs=roofs, colors=dict(BOUND_COLORS), label="roofline")
    return [Figure(
        "Roofline: regions and the heaviest kernels",
        chart,
        "x: FLOPs per byte moved; y: achieved TFLOP/s; lines: the device roofs per data type. Colour is the bound label; hover a dot for its name.",
    )]
