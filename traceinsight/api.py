"""The public Python API: ``load`` a trace, ``analyze`` it, ``diff`` two runs.

Each function takes a path or an already loaded :class:`~traceinsight.trace.model.Trace`.
Imports are lazy so that ``import traceinsight`` stays light (and ``traceinsight.capture``
works where polars is absent).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from traceinsight.analysis.base import AnalysisConfig
    from traceinsight.analysis.diff import DiffResult
    from traceinsight.analysis.report import Report
    from traceinsight.trace.model import Trace

__all__ = ["PathOrTrace", "analyze", "diff", "load"]

PathOrTrace = Union["Trace", str, "os.PathLike[str]"]


def load(path: str | os.PathLike[str], *, cache: bool = True) -> Trace:
    """Load a Kineto trace (``.json`` / ``.json.gz``) into a :class:`Trace`.

    ``cache`` reuses (and writes) the Parquet copy next to the cache directory's other traces.
    """
    from traceinsight.trace.loader import load as load_trace

    return load_trace(path, cache=cache)


def _as_trace(value: PathOrTrace, *, cache: bool) -> Trace:
    from traceinsight.trace.model import Trace

    return value if isinstance(value, Trace) else load(value, cache=cache)


def analyze(
    trace: PathOrTrace,
    config: AnalysisConfig | None = None,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    on_section: Callable[[str], None] | None = None,
    cache: bool = True,
) -> Report:
    """Run every registered analysis (or the ``only`` / not ``skip`` ones) over a trace.

    The :class:`Report` displays itself in notebooks and renders to Markdown and HTML.
    """
    # Registers the notebook display functions (Report._repr_html_ and friends).
    import traceinsight.render  # noqa: F401
    from traceinsight.analysis.report import analyze as analyze_trace

    return analyze_trace(_as_trace(trace, cache=cache), config, only=only, skip=skip, on_section=on_section)


def diff(
    before: PathOrTrace,
    after: PathOrTrace,
    *,
    cache: bool = True,
    label_before: str | None = None,
    label_after: str | None = None,
    alpha: float | None = None,
    n_boot: int | None = None,
    seed: int | None = None,
    min_steps: int | None = None,
    top_n: int | None = None,
    config: AnalysisConfig | None = None,
    drop_outliers: bool = False,
) -> DiffResult:
    """Compare ``after`` with ``before``: step-time verdict, breakdown deltas, what changed.

    Options left as None take :class:`traceinsight.analysis.diff.DiffOptions`' defaults
    (``alpha`` 0.05, ``n_boot`` 4000 bootstrap resamples, ``seed`` 0, ``min_steps`` 3,
    ``top_n`` 10 rows per table).
    """
    import traceinsight.render  # noqa: F401
    from traceinsight.analysis.diff import DiffOptions, diff_traces

    d = DiffOptions()
    options = DiffOptions(
        label_before=label_before,
        label_after=label_after,
        alpha=d.alpha if alpha is None else alpha,
        n_boot=d.n_boot if n_boot is None else n_boot,
        seed=d.seed if seed is None else seed,
        min_steps=d.min_steps if min_steps is None else min_steps,
        top_n=d.top_n if top_n is None else top_n,
        config=d.config if config is None else config,
        drop_outliers=drop_outliers,
    )
    return diff_traces(_as_trace(before, cache=cache), _as_trace(after, cache=cache), options)
