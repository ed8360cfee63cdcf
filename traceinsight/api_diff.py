"""``diff(before, after)``: compare two runs from Python (paths or loaded traces)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceinsight.analysis.diff import DiffResult
    from traceinsight.trace.model import Trace

__all__ = ["diff"]


def _as_trace(value: Trace | str | os.PathLike[str], cache: bool) -> Trace:
    from traceinsight.trace.model import Trace

    if isinstance(value, Trace):
        return value
    from traceinsight.trace.loader import load

    return load(value, cache=cache)


def diff(
    before: Trace | str | os.PathLike[str],
    after: Trace | str | os.PathLike[str],
    *,
    cache: bool = True,
    **opts: Any,
) -> DiffResult:
    """Compare ``after`` with ``before``: step-time verdict, breakdown deltas, what changed.

    ``opts`` are the fields of :class:`traceinsight.analysis.diff.DiffOptions`
    (``label_before``, ``label_after``, ``alpha``, ``n_boot``, ``seed``, ``min_steps``,
    ``top_n``, ``config``).
    """
    from traceinsight.analysis.diff import DiffOptions, diff_traces

    return diff_traces(_as_trace(before, cache), _as_trace(after, cache), DiffOptions(**opts))
