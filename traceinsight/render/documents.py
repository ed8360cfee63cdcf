"""What the single-purpose commands print: one analysis result plus the options that shape it.

``analyze`` renders a :class:`~traceinsight.analysis.report.Report` and ``diff`` a
:class:`~traceinsight.analysis.diff.compare.DiffResult` directly; the commands that show one section
(or query rows) wrap their result in one of these so every output goes through
:mod:`traceinsight.render.formats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.whatif.model import WhatIfResult

BoundGrouping = Literal["region", "op", "kernel"]


@dataclass(frozen=True)
class GapsListing:
    """``traceinsight gaps``: the gaps result and the gaps it lists (all, or the largest ``limit``)."""

    trace_path: str
    result: GapsResult
    listed: pl.DataFrame
    limit: int | None = None


@dataclass(frozen=True)
class BoundListing:
    """``traceinsight bound``: the bound result shown per region, op or kernel."""

    trace_path: str
    result: BoundResult
    by: BoundGrouping = "region"
    limit: int = 20


@dataclass(frozen=True)
class CompileReport:
    """``traceinsight compile``: the torch.compile result of one trace."""

    trace_path: str
    result: CompileResult


@dataclass(frozen=True)
class WhatIfReport:
    """``traceinsight whatif``: the trace replayed as recorded and with the changes."""

    trace_path: str
    result: WhatIfResult


@dataclass(frozen=True)
class QueryRows:
    """``traceinsight sql``: the rows a query returned."""

    trace_path: str
    query: str
    engine: str
    rows: pl.DataFrame
