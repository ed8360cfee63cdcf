"""Markdown building blocks: tables, name cells and a section's generic lines (its facts and the
head of its main table); ``report_markdown.py`` writes the report with them.

Meant for pasting into issues, pull requests and wikis: GitHub-flavoured Markdown whose only
HTML is ``<details>`` around names too long for a table cell (kernel names run to hundreds of
characters): the cell shows the name shortened in the middle, a click shows it whole.
"""

from __future__ import annotations

import html

from traceinsight.analysis.core.base import Result
from traceinsight.render import generic
from traceinsight.render.fit import shorten_distinct, shorten_middle

NAME_CELL = 60
_NAME_COLUMNS = frozenset({"name", "op", "culprit", "region"})


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|").replace("\n", " ")


def _html(text: str) -> str:
    return html.escape(text).replace("|", "&#124;")


def name_cells(names: list[str], width: int = NAME_CELL) -> list[str]:
    """Name cells of one column, shortened so that names which differ never read the same."""
    from traceinsight.render.labels import kernel_label

    labels = [name if len(name) <= width else kernel_label(name) or name for name in names]
    clash = {label for label in labels if labels.count(label) > 1}
    labels = [name if label in clash else label for name, label in zip(names, labels, strict=True)]
    shorts = shorten_distinct(labels, width)
    return [name_cell(name, width, short) for name, short in zip(names, shorts, strict=True)]


def name_cell(name: str, width: int = NAME_CELL, short: str | None = None) -> str:
    """A name for a table cell: whole in code style when short, else shortened in the middle
    (or as ``short``) with the full name one click away."""
    from traceinsight.render.labels import kernel_label

    if len(name) <= width:
        return f"<code>{_html(name)}</code>" if "<" in name or "`" in name else f"`{name}`"
    short = short or shorten_middle(kernel_label(name) or name, width)
    return f"<details><summary><code>{_html(short)}</code></summary><code>{_html(name)}</code></details>"


def md_table(columns: tuple[str, ...] | list[str], rows: tuple[tuple[str, ...], ...] | list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(_escape(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines.extend("| " + " | ".join(c if c.startswith(("<details>", "<code>")) else _escape(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def generic_lines(result: Result, *, max_rows: int = 10) -> list[str]:
    """A section's facts and the head of its main table, for sections without their own view
    (and for views that add to it)."""
    out: list[str] = []
    gv = generic.view(result, max_rows=max_rows)
    if gv.facts:
        out.extend(f"- **{key}**: {value}" for key, value in gv.facts)
        out.append("")
    if gv.rows:
        names = [i for i, c in enumerate(gv.columns) if c in _NAME_COLUMNS]
        cells = {i: name_cells([r[i] for r in gv.rows]) for i in names}
        rows = [tuple(cells[i][k] if i in names and v != "-" else v for i, v in enumerate(r)) for k, r in enumerate(gv.rows)]
        out.extend([md_table(gv.columns, rows), ""])
        if gv.total_rows > len(gv.rows):
            out.extend([f"_{gv.total_rows - len(gv.rows)} more rows in the JSON report._", ""])
    return out
