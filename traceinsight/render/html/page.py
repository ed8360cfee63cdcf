"""Building blocks of the HTML pages: a figure, facts, a table, one result, the page shell."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from traceinsight.analysis.core.base import Result
from traceinsight.render import generic
from traceinsight.render.fit import shorten_distinct
from traceinsight.render.html.styles import CSS
from traceinsight.version import __version__

MAX_TABLE_ROWS = 15


@dataclass(frozen=True)
class Figure:
    title: str
    svg: str
    note: str = ""


def figure_html(fig: Figure) -> str:
    note = f"<p class='note'>{escape(fig.note)}</p>" if fig.note else ""
    return f"<figure><figcaption>{escape(fig.title)}</figcaption>{fig.svg}{note}</figure>"


NAME_CELL = 60


_WORD = re.compile(r"^[A-Za-z][a-z]*[,.:;)]?$")


def is_prose(value: str) -> bool:
    """Words rather than a name: several plain words (a C++ name's spaces separate template
    arguments, not words). Prose wraps at spaces and is never cut."""
    return sum(bool(_WORD.match(token)) for token in value.split()) >= 3


# A name longer than this may wrap in its cell (anywhere: names have few spaces), so that the
# table fits its card; shorter values (figures, units) stay on one line.
WRAP_NAME = 24


def _cell(value: str, shown: str) -> str:
    """A cell; a long name shortened (``shown``), whole in its tooltip; prose whole, wrapped."""
    if is_prose(value):
        return f"<td class='prose'>{escape(value)}</td>"
    cls = " class='name'" if len(shown) > WRAP_NAME else ""
    if shown == value:
        return f"<td{cls}>{escape(value)}</td>"
    return f"<td{cls} title='{escape(value, quote=True)}'>{escape(shown)}</td>"


def table_html(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    # Shortened a column at a time, so that names that differ never read the same.
    width = len(rows[0]) if rows else 0
    cut = [shorten_distinct([row[i] for row in rows], NAME_CELL) for i in range(width)]
    body = "".join("<tr>" + "".join(_cell(v, cut[i][r]) for i, v in enumerate(row)) + "</tr>" for r, row in enumerate(rows))
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def facts_html(items: Sequence[tuple[str, str]]) -> str:
    if not items:
        return ""
    return "<dl class='facts'>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items) + "</dl>"


def result_html(result: Result, figures: Sequence[Figure] = ()) -> str:
    """One result as HTML: figures, facts, the head of its table (also used in notebooks)."""
    if not result.available:
        return f"<p class='unavailable'>Not available: {escape(str(result.reason))}</p>"
    gv = generic.view(result, max_rows=MAX_TABLE_ROWS, max_cols=12)
    parts = [figure_html(f) for f in figures]
    parts.append(facts_html(gv.facts))
    if gv.rows:
        parts.append(table_html(gv.columns, gv.rows))
        if gv.total_rows > len(gv.rows):
            parts.append(f"<p class='note'>{gv.total_rows - len(gv.rows):,} more rows in the JSON report or <code>result.to_polars()</code>.</p>")
    return "".join(parts)


def page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}<footer>traceinsight {escape(__version__)}</footer></main></body></html>"
    )
