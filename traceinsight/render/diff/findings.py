"""The findings part of a diff: what appeared, disappeared or changed saving, in every format."""

from __future__ import annotations

from html import escape

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.diff.findings import FindingChange, FindingsDiff

_STYLE = {"disappeared": "green", "appeared": "red", "changed": "", "unchanged": "dim"}


def _saving(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def rows(diff: FindingsDiff) -> list[tuple[str, str, str, str]]:
    """(status, id, before saving, after saving) for every finding that moved."""

    def row(c: FindingChange) -> tuple[str, str, str, str]:
        return c.status, c.id if c.rank is None else f"{c.id} (rank {c.rank})", _saving(c.before_saving_pct), _saving(c.after_saving_pct)

    return [row(c) for c in diff.changes if c.status != "unchanged"]


def _unchanged(diff: FindingsDiff) -> str:
    same = diff.of("unchanged")
    return ("unchanged: " + ", ".join(c.id for c in same)) if same else ""


def render_terminal(diff: FindingsDiff, before: str, after: str) -> RenderableType:
    if not diff.available:
        return Text(f"findings: not available ({diff.reason})", style="yellow")
    moved = rows(diff)
    if not moved:
        return Text("findings: the same in both runs" + (f" ({_unchanged(diff)})" if diff.changes else " (none)"), style="dim")
    table = Table(title="findings (saving as each run estimates it)", box=None, title_justify="left", pad_edge=False)
    for col, justify in (("", "left"), ("finding", "left"), (before, "right"), (after, "right")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for status, name, b, a in moved:
        table.add_row(Text(status, style=_STYLE[status]), name, b, a)
    if diff.of("unchanged"):
        table.caption = _unchanged(diff)
        table.caption_justify = "left"
    return table


def render_markdown(diff: FindingsDiff, before: str, after: str) -> list[str]:
    if not diff.available:
        return [f"_Findings not available: {diff.reason}_", ""]
    moved = rows(diff)
    out = ["### Findings", ""]
    if not moved:
        return [*out, "The same in both runs" + (f" ({_unchanged(diff)})." if diff.changes else " (none)."), ""]
    out += [f"| | finding | {before} | {after} |", "|---|---|---:|---:|"]
    out += [f"| {s} | `{n}` | {b} | {a} |" for s, n, b, a in moved]
    if diff.of("unchanged"):
        out += ["", f"_{_unchanged(diff)}_"]
    return [*out, ""]


def render_html(diff: FindingsDiff, before: str, after: str) -> str:
    if not diff.available:
        return f"<section><h2>Findings</h2><p class='unavailable'>Not available: {escape(diff.reason or '')}</p></section>"
    moved = rows(diff)
    body = "".join(
        f"<tr><td>{escape(s)}</td><td><code>{escape(n)}</code></td><td>{escape(b)}</td><td>{escape(a)}</td></tr>"
        for s, n, b, a in moved
    )
    head = f"<tr><th></th><th>finding</th><th>{escape(before)}</th><th>{escape(after)}</th></tr>"
    table = f"<table>{head}{body}</table>" if moved else "<p>The same in both runs.</p>"
    note = f"<p class='note'>{escape(_unchanged(diff))}</p>" if diff.of("unchanged") else ""
    return f"<section><h2>Findings</h2>{table}{note}</section>"
