"""What the single-purpose commands print: one analysis result plus the options that shape it.

``analyze`` renders a :class:`~traceinsight.analysis.report.Report` and ``diff`` a
:class:`~traceinsight.analysis.diff.compare.DiffResult` (wrapped by ``render/report_documents.py``);
the commands that show one section (or query rows) wrap their result in one of these, each a
:class:`~traceinsight.render.document.Document` itself, so every output goes through
:mod:`traceinsight.render.formats`. They are written as terminal text and JSON (and the rows
as CSV); the Markdown and HTML formats do not list their kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import polars as pl
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from traceinsight.analysis.core.base import jsonable
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.whatif.model import WhatIfResult
from traceinsight.render.outputs.base import RenderOptions

BoundGrouping = Literal["region", "op", "kernel"]


class _OneSection:
    """What the one-section documents share: their trace as input, no Markdown nor HTML."""

    trace_path: str
    section: ClassVar[str]

    def inputs(self) -> dict[str, str | list[str]]:
        return {"trace": self.trace_path}

    def options(self) -> dict[str, Any]:
        return {}

    def sections(self) -> list[str]:
        return [self.section]

    def markdown(self, options: RenderOptions) -> str:
        raise TypeError(f"a {self.section} listing has no Markdown")

    def html(self, options: RenderOptions) -> str:
        raise TypeError(f"a {self.section} listing has no HTML")

    def fragment(self) -> str | None:
        return None


@dataclass(frozen=True)
class GapsListing(_OneSection):
    """``traceinsight gaps``: the gaps result and the gaps it lists (all, or the largest ``limit``)."""

    trace_path: str
    result: GapsResult
    listed: pl.DataFrame
    limit: int | None = None
    kind: ClassVar[Literal["gaps"]] = "gaps"
    width: ClassVar[int] = 100
    section: ClassVar[str] = "gaps"

    def options(self) -> dict[str, Any]:
        return {"limit": self.limit}

    def body(self) -> dict[str, Any]:
        payload = self.result.to_dict()
        payload["gaps"] = jsonable(self.listed)
        return {"gaps": payload}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.sections.gaps import gaps_table, render_terminal

        result = self.result
        if not result.available:
            return Text(f"not available: {result.reason}", style="yellow")
        title = f"{self.listed.height:,} of {result.gap_count:,} gaps (start from window start)"
        return Group(render_terminal(result, include_top=False), gaps_table(self.listed, title=title, origin_ns=result.window_start_ns))


@dataclass(frozen=True)
class BoundListing(_OneSection):
    """``traceinsight bound``: the bound result shown per region, op or kernel."""

    trace_path: str
    result: BoundResult
    by: BoundGrouping = "region"
    limit: int = 20
    kind: ClassVar[Literal["bound"]] = "bound"
    width: ClassVar[int] = 100
    section: ClassVar[str] = "bound"

    def options(self) -> dict[str, Any]:
        return {"by": self.by}

    def body(self) -> dict[str, Any]:
        return {"bound": self.result.to_dict()}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.sections.bound import render_by

        result = self.result
        body = render_by(result, self.by, limit=self.limit) if result.available else Text(f"not available: {result.reason}", style="yellow")
        return Panel(body, title=f"[bold]Bound by {self.by}[/bold]", title_align="left", expand=True)


@dataclass(frozen=True)
class CompileReport(_OneSection):
    """``traceinsight compile``: the torch.compile result of one trace."""

    trace_path: str
    result: CompileResult
    kind: ClassVar[Literal["compile"]] = "compile"
    width: ClassVar[int] = 140
    section: ClassVar[str] = "compile"

    def body(self) -> dict[str, Any]:
        return {"compile": self.result.to_dict()}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.terminal import section_renderable

        return section_renderable("compile", self.result)


@dataclass(frozen=True)
class WhatIfReport(_OneSection):
    """``traceinsight whatif``: the trace replayed as recorded and with the changes."""

    trace_path: str
    result: WhatIfResult
    kind: ClassVar[Literal["whatif"]] = "whatif"
    width: ClassVar[int] = 120
    section: ClassVar[str] = "whatif"

    def options(self) -> dict[str, Any]:
        return {"changes": [str(t.get("description", "")) for t in self.result.transformations]}

    def body(self) -> dict[str, Any]:
        return {"whatif": self.result.to_dict()}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.whatif_view import render_terminal

        return render_terminal(self.result)


@dataclass(frozen=True)
class QueryRows(_OneSection):
    """``traceinsight sql``: the rows a query returned."""

    trace_path: str
    query: str
    engine: str
    rows: pl.DataFrame
    kind: ClassVar[Literal["sql"]] = "sql"
    width: ClassVar[None] = None
    section: ClassVar[str] = "rows"

    def options(self) -> dict[str, Any]:
        return {"query": self.query, "engine": self.engine}

    def body(self) -> dict[str, Any]:
        return {"rows": jsonable(self.rows)}

    def terminal(self, narrow: bool) -> RenderableType:
        frame = self.rows
        table = Table(box=None, pad_edge=False)
        for col, dtype in frame.schema.items():
            numeric = dtype.is_numeric()
            table.add_column(col, overflow="fold", justify="right" if numeric else "left", no_wrap=numeric)
        for row in frame.iter_rows():
            table.add_row(*("" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in row))
        return Group(table, Text(f"{frame.height:,} row(s)", style="dim"))
