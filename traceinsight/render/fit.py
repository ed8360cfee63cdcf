"""Tables that fit the terminal without cutting a number.

Every terminal table of the report goes through :class:`FitTable`. Its columns say what they
hold: figures (``num``) and short labels (``label``) are always printed in full; long names
(``name``) are shortened in the middle, keeping the head and the distinctive tail; prose
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

Kind = Literal["name", "num", "label", "text"]
Cell = str | Text

ELLIPSIS = "…"
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


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells by dropping its middle: the start says what it is, the
    end (template arguments, tile sizes, the op's last part) tells similar names apart."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    keep = width - 1
    head = max(1, keep * 2 // 5)
    tail = keep - head
    # Never next to a digit: a number split by the ellipsis would read as a different number.
    while head > 1 and text[head - 1].isdigit():
        head -= 1
    while tail > 0 and text[len(text) - tail].isdigit():
        tail -= 1
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _text(cell: Cell, style: str | None = None) -> Text:
    if isinstance(cell, Text):
        return cell.copy()
    return Text(cell, style=style or "")


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
        without the optional columns."""
        everything = list(range(len(self.columns)))
        required = [i for i in everything if not self.columns[i].optional]
        for shown, gap in ((everything, GAP), (everything, 1), (required, GAP), (required, 1)):
            widths = self.layout(width, shown, gap)
            if widths is not None:
                return shown, widths, gap
        return None

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
            return natural
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
        for row, style in zip(self.rows, self.row_styles, strict=True):
            cells = [
                _shortened(row[i], w) if col.kind == "name" else _text(row[i])
                for i, col, w in zip(shown, cols, widths, strict=True)
            ]
            table.add_row(*cells, style=style)
        return table

    def _stacked(self, width: int) -> list[RenderableType]:
        lines: list[RenderableType] = []
        names = [i for i, c in enumerate(self.columns) if c.kind == "name"] or [0]
        indent = "  "
        for row, style in zip(self.rows, self.row_styles, strict=True):
            head = Text(style=style or "")
            for k, i in enumerate(names):
                if k:
                    head.append("  ")
                head.append_text(_text(row[i]))
            head.stylize("bold")
            lines.append(_shortened(head, width) if cell_len(head.plain) > width else head)
            line = Text(indent, style=style or "")
            prose: list[Text] = []
            for i, col in enumerate(self.columns):
                if i in names:
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
