"""The memory snapshot report as one HTML page: the memory-over-time plot, then each part."""

from __future__ import annotations

from html import escape

from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.html.page import facts_html, page, table_html
from traceinsight.render.snapshot.view import parts, title
from traceinsight.render.svg import _svg, _text, color, legend, nice_max, nice_ticks

GIB = 1 << 30


def timeline_svg(
    report: SnapshotReport, *, by: str = "site", width: int = 900, height: int = 260
) -> str:
    """Allocated memory over the trace, stacked by the sites that hold most at the peak (like
    the active-memory timeline of PyTorch's visualizer) or, ``by="role"``, by the role memory
    plays (parameters, gradients, ...), with reserved memory as a line. The x axis is the event
    order (time is missing in some snapshots and bunched in others)."""
    t = report.timeline
    if t is None or t.points.is_empty():
        return ""
    groups, series = t.sites, t.series
    if by == "role":
        if t.role_series is None or not t.roles:
            return ""
        groups, series = t.roles, t.role_series.rename({"role": "site"})
    points = t.points.sort("idx")
    xs = points["idx"].to_list()
    reserved = points["reserved_bytes"].to_list()
    left, right, bottom = 56, 10, 30
    items = [(site, color(i)) for i, site in enumerate(groups)] + [("reserved", "#333")]
    body, legend_h = legend(items, left, width - right)
    top = legend_h + 8
    height += legend_h
    plot_w, plot_h = width - left - right, height - top - bottom
    x0, x1 = int(xs[0]), int(max(xs[-1], xs[0] + 1))
    y1 = nice_max(max(max(reserved), max(points["allocated_bytes"].to_list()), 1) / GIB)

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y_bytes: float) -> float:
        return top + plot_h - min(y_bytes / GIB, y1) / y1 * plot_h

    for tick in nice_ticks(0, y1, 4):
        y = py(tick * GIB)
        body.append(
            f"<line x1='{left}' x2='{width - right}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ddd'/>"
        )
        body.append(_text(left - 4, y + 4, f"{tick:g}", "end"))
    wide = series.pivot(on="site", index="idx", values="live_bytes").sort("idx")
    below = [0] * len(xs)
    for i, site in enumerate(groups):
        if site not in wide.columns:
            continue
        values = wide[site].fill_null(0).to_list()
        upper = [b + v for b, v in zip(below, values, strict=True)]
        outline = [f"{px(x):.1f},{py(u):.1f}" for x, u in zip(xs, upper, strict=True)]
        back = [
            f"{px(x):.1f},{py(b):.1f}" for x, b in zip(reversed(xs), reversed(below), strict=True)
        ]
        body.append(
            f"<polygon points='{' '.join(outline + back)}' fill='{color(i)}' fill-opacity='0.85'><title>{escape(site)}</title></polygon>"
        )
        below = upper
    line = " ".join(f"{px(x):.1f},{py(r):.1f}" for x, r in zip(xs, reserved, strict=True))
    body.append(
        f"<polyline points='{line}' fill='none' stroke='#333' stroke-width='1.2' stroke-dasharray='4 2'><title>reserved</title></polyline>"
    )
    body.append(_text(width - right, height - 2, "event", "end", "muted"))
    body.append(_text(left, height - 2, f"{x0:,}", "start", "muted"))
    body.append(_text(left + plot_w / 2, height - 2, f"{(x0 + x1) // 2:,}", "middle", "muted"))
    mid = top + plot_h / 2
    body.append(
        f"<text x='12' y='{mid:.1f}' text-anchor='middle' class='muted' transform='rotate(-90 12 {mid:.1f})'>GiB</text>"
    )
    return _svg(
        width, height, body, f"memory over time by {'role' if by == 'role' else 'allocation site'}"
    )


def render_html(report: SnapshotReport, top: int = 15) -> str:
    sections: list[str] = []
    svg = timeline_svg(report)
    by_role = timeline_svg(report, by="role")
    shown = parts(report, top=top)
    for i, part in enumerate(shown):
        html = [
            f"<h{1 if i == 0 else 2}>{escape(part.title)}</h{1 if i == 0 else 2}>",
            facts_html(part.facts),
        ]
        if i == 0 and svg:
            points = report.timeline.points.height if report.timeline is not None else 0
            html.append(
                f"<figure><figcaption>Allocated memory by site ({points:,} points)</figcaption>{svg}</figure>"
            )
            if by_role:
                html.append(
                    f"<figure><figcaption>Allocated memory by role ({points:,} points)</figcaption>{by_role}</figure>"
                )
        if part.rows:
            html.append(table_html(part.columns, part.rows))
        html.extend(f"<p class='note'>{escape(n)}</p>" for n in part.notes)
        sections.append("<section>" + "".join(html) + "</section>")
    heading = title(report) if report.compare is not None else f"Memory snapshot: {report.path}"
    return page(heading, "".join(sections))
