"""Small inline-SVG charts for the HTML report: no JavaScript, no external assets.

Every chart is a function of plain Python data returning one ``<svg>`` element that scales to
its container (``viewBox`` + ``width=100%``). Hover text uses SVG ``<title>`` elements.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)
FONT = "font-family='system-ui,-apple-system,Segoe UI,sans-serif' font-size='11'"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f"<svg class='chart' role='img' aria-label='{escape(label, quote=True)}' "
        f"viewBox='0 0 {width} {height}' width='100%' preserveAspectRatio='xMinYMin meet' "
        f"xmlns='http://www.w3.org/2000/svg' {FONT}>"
        + "".join(body)
        + "</svg>"
    )


def _text(x: float, y: float, s: str, anchor: str = "start", cls: str = "") -> str:
    c = f" class='{cls}'" if cls else ""
    return f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}'{c}>{escape(s)}</text>"


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str = "") -> str:
    t = f"<title>{escape(title)}</title>" if title else ""
    return f"<rect x='{x:.2f}' y='{y:.2f}' width='{max(w, 0.0):.2f}' height='{h:.2f}' fill='{fill}'>{t}</rect>"


def _short(s: str, n: int) -> str:
    # The middle goes: the end of a kernel or op name is what tells similar ones apart.
    from traceinsight.render.fit import shorten_middle

    return shorten_middle(s, n)


LEGEND_ROW = 16


def legend(items: Sequence[tuple[str, str]], left: float, right_edge: float) -> tuple[list[str], int]:
    """Swatches with names, wrapped onto as many rows as the width needs; returns the height."""
    body: list[str] = []
    x, row = left, 0
    for name, fill in items:
        w = 30 + 6.8 * len(name)
        if x > left and x + w > right_edge:
            x, row = left, row + 1
        y = 3 + row * LEGEND_ROW
        body.append(_rect(x, y, 10, 10, fill))
        body.append(_text(x + 14, y + 9, name))
        x += w
    return body, (row + 1) * LEGEND_ROW + 4 if items else 0


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=10 * mag)
    start = math.ceil(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 12))
        v += step
    return ticks


def nice_max(value: float, n: int = 4) -> float:
    """The smallest round tick at or above ``value``: the top of an axis that starts at 0."""
    if value <= 0:
        return 1.0
    ticks = nice_ticks(0.0, value, n)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else value
    top = ticks[-1]
    return top if top >= value else top + step


@dataclass(frozen=True)
class Span:
    """One interval on a strip: [start, end) in the strip's units, a colour and hover text."""

    start: float
    end: float
    fill: str
    title: str = ""


def strip(
    lanes: Sequence[tuple[str, Sequence[Span]]],
    *,
    lo: float,
    hi: float,
    unit: str = "ms",
    legend_items: Sequence[tuple[str, str]] = (),
    width: int = 900,
    label: str = "timeline",
) -> str:
    """Horizontal lanes of coloured intervals over a shared time axis (a timeline)."""
    left, right, lane_h, gap = 110, 10, 18, 6
    body, legend_h = legend(legend_items, left, width - right)
    top = max(legend_h, 4)
    height = top + len(lanes) * (lane_h + gap) + 26
    plot_w = width - left - right
    span = (hi - lo) or 1.0
    for i, (name, spans) in enumerate(lanes):
        y = top + i * (lane_h + gap)
        body.append(_text(left - 6, y + lane_h * 0.7, _short(name, 18), "end"))
        body.append(_rect(left, y, plot_w, lane_h, "#eeeeee"))
        for s in spans:
            x0 = left + (max(s.start, lo) - lo) / span * plot_w
            x1 = left + (min(s.end, hi) - lo) / span * plot_w
            body.append(_rect(x0, y, max(x1 - x0, 0.6), lane_h, s.fill, s.title))
    axis_y = top + len(lanes) * (lane_h + gap)
    for t in nice_ticks(lo, hi):
        x = left + (t - lo) / span * plot_w
        body.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{axis_y - 2}' y2='{axis_y + 3}' stroke='#666'/>")
        body.append(_text(x, axis_y + 14, f"{t - lo:g} {unit}", "middle"))
    return _svg(width, height, body, label)


def hbars(
    items: Sequence[tuple[str, float, str]],
    *,
    value_label: str = "",
    fmt: str = "{:.3g}",
    width: int = 900,
    label: str = "bar chart",
    label_chars: int = 46,
) -> str:
    """Horizontal bars: (label, value, hover text) per row, longest value at full width."""
    left, right, bar_h, gap = min(16 + round(6.4 * label_chars), 340), 80, 14, 5
    height = 8 + len(items) * (bar_h + gap) + (16 if value_label else 0)
    plot_w = width - left - right
    vmax = max((v for _, v, _ in items), default=0.0) or 1.0
    body = []
    for i, (name, value, title) in enumerate(items):
        y = 4 + i * (bar_h + gap)
        w = max(value, 0.0) / vmax * plot_w
        body.append(_text(left - 6, y + bar_h * 0.8, _short(name, label_chars), "end"))
        body.append(_rect(left, y, w, bar_h, color(0), title or f"{name}: {fmt.format(value)}"))
        body.append(_text(left + w + 4, y + bar_h * 0.8, fmt.format(value)))
    if value_label:
        body.append(_text(left, height - 4, value_label, cls="muted"))
    return _svg(width, height, body, label)


def stacked_hbars(
    rows: Sequence[tuple[str, Sequence[tuple[str, float]]]],
    *,
    colors: dict[str, str] | None = None,
    width: int = 900,
    label: str = "stacked bars",
    fmt: str = "{:.1f} %",
) -> str:
    """One bar per row split into named parts (values are shares that need not sum to 100)."""
    names: list[str] = []
    for _, parts in rows:
        for part, _ in parts:
            if part not in names:
                names.append(part)
    palette = colors or {}
    fills = {n: palette.get(n, color(i)) for i, n in enumerate(names)}
    left, right, bar_h, gap = 110, 10, 20, 8
    body, top = legend([(n, fills[n]) for n in names], left, width - right)
    height = top + len(rows) * (bar_h + gap) + 4
    plot_w = width - left - right
    for i, (row_name, parts) in enumerate(rows):
        y = top + i * (bar_h + gap)
        total = sum(max(v, 0.0) for _, v in parts) or 1.0
        body.append(_text(left - 6, y + bar_h * 0.7, _short(row_name, 16), "end"))
        x = float(left)
        for part, value in parts:
            w = max(value, 0.0) / total * plot_w
            body.append(_rect(x, y, w, bar_h, fills[part], f"{row_name} {part}: {fmt.format(value)}"))
            if w > 40:
                body.append(f"<text x='{x + w / 2:.1f}' y='{y + bar_h * 0.7:.1f}' text-anchor='middle' fill='#fff'>{escape(fmt.format(value))}</text>")
            x += w
    return _svg(width, height, body, label)


def columns(
    items: Sequence[tuple[str, Sequence[float]]],
    *,
    series: Sequence[str],
    colors: Sequence[str] | None = None,
    y_label: str = "",
    width: int = 900,
    height: int = 220,
    label: str = "column chart",
) -> str:
    """Vertical stacked columns: one per item (e.g. a step), split into ``series`` parts."""
    left, right, bottom = 56, 10, 28
    fills = list(colors or [color(i) for i in range(len(series))])
    body, legend_h = legend(list(zip(series, fills, strict=False)), left, width - right)
    top = legend_h + 8
    height += legend_h - LEGEND_ROW
    plot_w, plot_h = width - left - right, height - top - bottom
    totals = [sum(max(v, 0.0) for v in vals) for _, vals in items]
    vmax = nice_max(max(totals, default=0.0))
    for t in nice_ticks(0, vmax, 4):
        y = top + plot_h - t / vmax * plot_h
        body.append(f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ddd'/>")
        body.append(_text(left - 4, y + 4, f"{t:g}", "end"))
    n = max(len(items), 1)
    slot = plot_w / n
    bar_w = max(min(slot * 0.7, 60), 1.0)
    for i, (name, vals) in enumerate(items):
        x = left + i * slot + (slot - bar_w) / 2
        y = float(top + plot_h)
        for s, v, fill in zip(series, vals, fills, strict=False):
            h = max(v, 0.0) / vmax * plot_h
            y -= h
            body.append(_rect(x, y, bar_w, h, fill, f"{name} {s}: {v:.3g} {y_label}"))
        if n <= 40 or i % math.ceil(n / 40) == 0:
            body.append(_text(x + bar_w / 2, top + plot_h + 14, _short(name, 8), "middle"))
    if y_label:
        body.append(_text(4, top - 8, y_label, cls="muted"))
    return _svg(width, height, body, label)


def lines(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    x_label: str = "",
    y_label: str = "",
    y_max: float | None = None,
    width: int = 900,
    height: int = 220,
    label: str = "line chart",
    x_range: tuple[float, float] | None = None,
) -> str:
    """Line chart of (x, y) series over shared axes (dots mark the samples); ``x_range`` fixes
    the x axis (e.g. the trace window, so that the chart lines up with the timeline)."""
    left, right, bottom = 56, 10, 30
    body, legend_h = legend([(name, color(i)) for i, (name, _) in enumerate(series)], left, width - right)
    top = legend_h + 8
    height += legend_h - LEGEND_ROW
    plot_w, plot_h = width - left - right, height - top - bottom
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = x_range if x_range is not None else (min(xs), max(xs)) if xs else (0.0, 1.0)
    y1 = y_max if y_max is not None else nice_max(max(ys) if ys else 1.0)
    x1 = x1 if x1 > x0 else x0 + 1.0
    y1 = y1 if y1 > 0 else 1.0

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - min(max(y, 0.0), y1) / y1 * plot_h

    for t in nice_ticks(0, y1, 4):
        body.append(f"<line x1='{left}' x2='{width - right}' y1='{py(t):.1f}' y2='{py(t):.1f}' stroke='#ddd'/>")
        body.append(_text(left - 4, py(t) + 4, f"{t:g}", "end"))
    # Ticks at round offsets from the first sample, labelled as such; whole numbers only when
    # the samples are indexes (steps), where "1.5" would name a step that does not exist.
    offsets = nice_ticks(0, x1 - x0, 6)
    if all(float(x).is_integer() for x in xs):
        stride = max(1, math.ceil((x1 - x0) / 6))
        offsets = [float(t) for t in range(0, int(x1 - x0) + 1, stride)]
    for t in offsets:
        body.append(_text(px(x0 + t), top + plot_h + 14, f"{t:g}", "middle"))
    for i, (name, pts) in enumerate(series):
        fill = color(i)
        if not pts:
            continue
        if x_range is not None:  # samples outside the window are not drawn beside the axes
            pts = [(x, y) for x, y in pts if x0 <= x <= x1]
            if not pts:
                continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        body.append(f"<polyline points='{path}' fill='none' stroke='{fill}' stroke-width='1.8'/>")
        for x, y in pts:
            body.append(f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='2.5' fill='{fill}'><title>{escape(name)}: {y:.3g}</title></circle>")
    if x_label:
        body.append(_text(width - right, height - 2, x_label, "end", "muted"))
    if y_label:
        # Along the axis, beside its numbers: a unit in the bottom corner reads as an x label.
        mid_y = top + plot_h / 2
        body.append(
            f"<text x='12' y='{mid_y:.1f}' text-anchor='middle' class='muted' "
            f"transform='rotate(-90 12 {mid_y:.1f})'>{escape(y_label)}</text>"
        )
    return _svg(width, height, body, label)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    name: str
    group: str


def loglog_scatter(
    points: Sequence[Point],
    *,
    roofs: Sequence[tuple[str, float, float]] = (),
    x_label: str = "arithmetic intensity (FLOP/byte)",
    y_label: str = "TFLOP/s",
    colors: dict[str, str] | None = None,
    width: int = 900,
    height: int = 340,
    label: str = "roofline",
) -> str:
    """Log-log scatter with optional rooflines: ``roofs`` = (name, peak_y, bandwidth slope)."""
    left, right, top, bottom = 60, 16, 24, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    good = [p for p in points if p.x > 0 and p.y > 0]
    xs = [p.x for p in good] or [1.0]
    ys = [p.y for p in good] or [1.0]
    peaks = [peak for _, peak, _ in roofs if peak > 0]
    lx0 = math.floor(math.log10(min(xs))) - 0.3
    lx1 = math.ceil(math.log10(max(xs))) + 0.3
    ly0 = math.floor(math.log10(min(ys))) - 0.3
    ly1 = math.ceil(math.log10(max([*ys, *peaks]))) + 0.1
    for _, peak, bw in roofs:
        if peak > 0 and bw > 0:
            lx1 = max(lx1, math.log10(peak / bw) + 0.5)

    def px(x: float) -> float:
        return left + (math.log10(x) - lx0) / (lx1 - lx0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (math.log10(y) - ly0) / (ly1 - ly0) * plot_h

    body = [f"<rect x='{left}' y='{top}' width='{plot_w}' height='{plot_h}' fill='none' stroke='#ccc'/>"]
    for e in range(math.ceil(lx0), math.floor(lx1) + 1):
        x = px(10.0**e)
        body.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top}' y2='{top + plot_h}' stroke='#eee'/>")
        body.append(_text(x, top + plot_h + 14, f"{10.0**e:g}", "middle"))
    for e in range(math.ceil(ly0), math.floor(ly1) + 1):
        y = py(10.0**e)
        body.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>")
        body.append(_text(left - 4, y + 4, f"{10.0**e:g}", "end"))
    # Named after the frame and axes drawn so far, not by a counter: the same report renders to
    # the same bytes in any process, and two charts in one notebook share a name only when they
    # clip to the same rectangle.
    clip = "clip-" + hashlib.sha1("".join(body).encode(), usedforsecurity=False).hexdigest()[:12]
    body.append(f"<clipPath id='{clip}'><rect x='{left}' y='{top}' width='{plot_w}' height='{plot_h}'/></clipPath>")
    for i, (name, peak, bw) in enumerate(roofs):
        if peak <= 0 or bw <= 0:
            continue
        ridge = peak / bw
        xa = 10.0**lx0
        pts = [(xa, bw * xa), (ridge, peak), (10.0**lx1, peak)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = "" if i == 0 else " stroke-dasharray='5,3'"
        body.append(f"<polyline clip-path='url(#{clip})' points='{path}' fill='none' stroke='#555' stroke-width='1.4'{dash}><title>{escape(name)}: peak {peak:g} TFLOP/s, ridge {ridge:.0f} FLOP/B</title></polyline>")
        body.append(_text(left + plot_w - 4, py(peak) - 4, f"{name} {peak:g}", "end", "muted"))
    groups = sorted({p.group for p in good})
    palette = colors or {}
    fills = {g: palette.get(g, color(i)) for i, g in enumerate(groups)}
    for p in good:
        body.append(
            f"<circle cx='{px(p.x):.1f}' cy='{py(p.y):.1f}' r='4.5' fill='{fills[p.group]}' fill-opacity='0.8' stroke='#333' stroke-width='0.5'>"
            f"<title>{escape(p.name)} ({escape(p.group)}): {p.x:.3g} FLOP/B, {p.y:.3g} TFLOP/s</title></circle>"
        )
    body += legend([(g, fills[g]) for g in groups], left, width - right)[0]
    body.append(_text(left + plot_w / 2, height - 4, x_label, "middle", "muted"))
    body.append(f"<text transform='translate(12,{top + plot_h / 2:.0f}) rotate(-90)' text-anchor='middle' class='muted'>{escape(y_label)}</text>")
    return _svg(width, height, body, label)
