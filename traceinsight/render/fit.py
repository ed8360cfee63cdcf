"""Tables that fit the terminal without cutting a number.

Every terminal table of the report goes through :class:`FitTable`. Its columns say what they
hold: figures (``num``) and short labels (``label``) are always printed in full; long names
(``name``) are shortened in the middle between whole words, keeping the head, the distinctive
tail and the part where names of the column differ (see :mod:`traceinsight.render.cut`); prose
(``text``) wraps at word boundaries. When even the names at their narrowest leave no room for
the figures, the table switches to a stacked layout: one block per record, its name on the
first line and ``header value`` pairs below, wrapped between pairs, never inside one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from traceinsight.render.cut import ELLIPSIS, shorten_distinct, shorten_middle

__all__ = ["ELLIPSIS", "Cell", "Col", "FitTable", "Kind", "shorten_distinct", "shorten_middle", "table"]

Kind = Literal["name", "num", "label", "text"]
Cell = str | Text

GAP = 2  # cells between two columns
NAME_MIN = 12
TEXT_MIN = 22
NAME_MAX = 72


@dataclass(frozen=True)
class Col:
    """One column: its header, what it holds and (for names and prose) its width bounds."""

    header: str
    kind: Kind = "num"
    justify: Literal["left", "right"] | None = None
    min_width: int | None = None
    max_width: int | None = None
    # Left out when the table would not fit otherwise (its content is said elsewhere too).
    optional: bool = False

    @property
    def align(self) -> Literal["left", "right"]:
        return self.justify or ("right" if self.kind == "num" else "left")

    @property
    def shrinks(self) -> bool:
        return self.kind in ("name", "text")

    def narrowest(self) -> int:
        if self.kind == "name":
            return max(self.min_width or NAME_MIN, min(cell_len(self.header), NAME_MIN))
        if self.kind == "text":
            return max(self.min_width or TEXT_MIN, min(cell_len(self.header), TEXT_MIN))
        return cell_len(self.header)


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _text(cell: Cell, style: str | None = None) -> Text:
    if isinstance(cell, Text):
        return cell.copy()
    return Text(cell, style=style or "")


def _restyled(cell: Cell, text: str) -> Text:
    if isinstance(cell, Text) and cell.plain == text:
        return cell.copy()
    return Text(text, style=cell.style if isinstance(cell, Text) else "")


def _shortened(cell: Cell, width: int) -> Text:
    plain = _plain(cell)
    if cell_len(plain) <= width:
        return _text(cell)
    style = cell.style if isinstance(cell, Text) else ""
    return Text(shorten_middle(plain, width), style=style)


class FitTable:
    """A borderless table laid out for the width it is printed at (see the module doc)."""

    def __init__(
        self,
        columns: Sequence[Col],
        rows: Iterable[Sequence[Cell]],
        *,
        title: str | None = None,
        row_styles: Sequence[str | None] | None = None,
    ) -> None:
        self.columns = tuple(columns)
        self.rows = [tuple(r) for r in rows]
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"row has {len(row)} cells for {len(self.columns)} columns")
        self.title = title
        self.row_styles = list(row_styles) if row_styles is not None else [None] * len(self.rows)

    # -- widths ---------------------------------------------------------------------------
    def natural_widths(self) -> list[int]:
        widths = []
        for i, col in enumerate(self.columns):
            w = max([cell_len(col.header)] + [cell_len(_plain(r[i])) for r in self.rows])
            if col.kind == "name":
                w = min(w, max(col.max_width or NAME_MAX, col.narrowest()))
            elif col.kind == "text" and col.max_width:
                w = min(w, max(col.max_width, col.narrowest()))
            widths.append(w)
        return widths

    def fitting(self, width: int) -> tuple[list[int], list[int], int] | None:
        """(shown column indexes, their widths, gap) that fit ``width``; None: stack instead.

        Tried in order: everything with two-cell gaps, then one-cell gaps, then the same
        without the optional columns, the rightmost optional one left out first, until the
        names fit whole (or no optional column is left)."""
        shown = list(range(len(self.columns)))
        optional = [i for i in shown if self.columns[i].optional]
        natural = self.natural_widths()
        while True:
            for gap in (GAP, 1):
                widths = self.layout(width, shown, gap)
                # An optional column is kept only where the names need not be cut for it.
                names_whole = all(
                    w >= natural[i] for i, w in zip(shown, widths or [], strict=False) if self.columns[i].kind == "name"
                )
                if widths is not None and (names_whole or not optional):
                    return shown, widths, gap
            if not optional:
                return None
            dropped = optional.pop()
            shown = [i for i in shown if i != dropped]

    def layout(self, width: int, shown: Sequence[int] | None = None, gap: int = GAP) -> list[int] | None:
        """Widths of the ``shown`` columns that fit ``width``, or None when they cannot."""
        shown = list(range(len(self.columns))) if shown is None else list(shown)
        all_natural = self.natural_widths()
        natural = [all_natural[i] for i in shown]
        cols = [self.columns[i] for i in shown]
        floor = [min(n, c.narrowest()) if c.shrinks else n for n, c in zip(natural, cols, strict=True)]
        gaps = gap * (len(cols) - 1)
        if sum(floor) + gaps > width:
            return None
        spare = width - gaps - sum(floor)
        want = [n - f for n, f in zip(natural, floor, strict=True)]
        total_want = sum(want)
        if total_want <= spare:
            return self._widen_names(natural, shown, spare - total_want)
        widths = list(floor)
        given = 0
        for i, w in enumerate(want):
            share = w * spare // total_want if total_want else 0
            widths[i] += share
            given += share
        # Hand out what rounding left, widest wants first.
        for i in sorted(range(len(want)), key=lambda j: -want[j]):
            if given >= spare:
                break
            if widths[i] < natural[i]:
                widths[i] += 1
                given += 1
        return widths

    def _widen_names(self, widths: list[int], shown: Sequence[int], spare: int) -> list[int]:
        """Room left over goes to the names cut at ``NAME_MAX``, up to their whole length:
        a wide terminal shows more of a long kernel name instead of empty columns."""
        out = list(widths)
        for k, i in enumerate(shown):
            if spare <= 0:
                break
            if self.columns[i].kind != "name" or self.columns[i].max_width:
                continue
            full = max([cell_len(self.columns[i].header)] + [cell_len(_plain(r[i])) for r in self.rows])
            extra = min(spare, max(0, full - out[k]))
            out[k] += extra
            spare -= extra
        return out

    # -- rendering ------------------------------------------------------------------------
    def _table(self, shown: list[int], widths: list[int], gap: int) -> Table:
        # Rich pads both sides of a cell: a gap of one is a right padding only.
        padding = (0, gap // 2) if gap % 2 == 0 else (0, 1, 0, 0)
        table = Table(box=None, pad_edge=False, show_edge=False, expand=False, padding=padding)
        cols = [self.columns[i] for i in shown]
        for col, w in zip(cols, widths, strict=True):
            table.add_column(
                col.header,
                justify=col.align,
                width=w,
                no_wrap=col.kind != "text",
                overflow="fold",
                header_style="bold",
            )
        # Names are cut a column at a time, so that names that differ never read the same.
        cut: dict[int, list[str]] = {
            i: shorten_distinct([_plain(row[i]) for row in self.rows], w)
            for i, col, w in zip(shown, cols, widths, strict=True)
            if col.kind == "name"
        }
        for r, (row, style) in enumerate(zip(self.rows, self.row_styles, strict=True)):
            cells = [
                _restyled(row[i], cut[i][r]) if i in cut else _text(row[i])
                for i, col, w in zip(shown, cols, widths, strict=True)
            ]
            table.add_row(*cells, style=style)
        return table

    def _stacked(self, width: int) -> list[RenderableType]:
        lines: list[RenderableType] = []
        names = [i for i, c in enumerate(self.columns) if c.kind == "name"] or [0]
        indent = "  "
        heads = []
        for row, style in zip(self.rows, self.row_styles, strict=True):
            head = Text(style=style or "")
            for k, i in enumerate(names):
                if k:
                    head.append("  ")
                head.append_text(_text(row[i]))
            head.stylize("bold")
            heads.append(head)
        cut = shorten_distinct([h.plain for h in heads], width)
        for row, style, head, short in zip(self.rows, self.row_styles, heads, cut, strict=True):
            lines.append(head if short == head.plain else Text(short, style=f"{style or ''} bold".strip()))
            line = Text(indent, style=style or "")
            prose: list[Text] = []
            for i, col in enumerate(self.columns):
                # Stacked is the narrowest layout: optional columns go, as in a narrow table
                # (an unnamed one, a row's mark, stays).
                if i in names or (col.optional and col.header):
                    continue
                value = _plain(row[i])
                if value == "" or (value == "-" and not col.header):
                    continue
                item = Text()
                if col.header:
                    item.append(col.header + " ", style="dim")
                item.append_text(_text(row[i]))
                if col.kind == "text":
                    prose.append(item)
                    continue
                if cell_len(line.plain) > len(indent) and cell_len(line.plain) + 3 + cell_len(item.plain) > width:
                    lines.append(line)
                    line = Text(indent, style=style or "")
                if cell_len(line.plain) > len(indent):
                    line.append("   ")
                line.append_text(item)
            if cell_len(line.plain) > len(indent):
                lines.append(line)
            lines.extend(Padding(item, (0, 0, 0, len(indent))) for item in prose)
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.title:
            yield Text(self.title, style="italic")
        fit = self.fitting(width)
        if fit is not None:
            yield self._table(*fit)
            return
        yield from self._stacked(width)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Cell]],
    kinds: Sequence[Kind] | str,
    *,
    title: str | None = None,
    row_styles: Sequence[str | None] | None = None,
) -> FitTable:
    """Shorthand: ``kinds`` as a sequence, or one letter a column (n=name, 9=num, l=label, t=text)."""
    letters = {"n": "name", "9": "num", "l": "label", "t": "text"}
    kind_list: list[Kind] = [letters[k] for k in kinds] if isinstance(kinds, str) else list(kinds)  # type: ignore[misc]
    return FitTable([Col(h, k) for h, k in zip(headers, kind_list, strict=True)], rows, title=title, row_styles=row_styles)
