"""Presentation hooks: the analysis layer asks for a view by kind, the presentation package
provides it.

Results and reports are plain data and must not import the presentation package (it imports
them). Instead, the presentation package registers one function per kind when it is imported,
and ``Result._repr_html_`` / ``Report.to_markdown`` / ``Report.write_html`` look it up here;
when nothing is registered yet, the first lookup calls the loader the package root gave
(:func:`set_loader`: it imports the presentation package), never an import by name from here.

Kinds: ``"result_html"`` (one result as an HTML fragment; a series of runs as its page's
content), ``"report_html"`` (a report, or a job report, as an HTML fragment for notebooks),
``"report_page"`` (a report, a job report or a series of runs as a self-contained HTML page),
``"report_markdown"`` (the same three as Markdown) and ``"report_json"`` (any of the three as
the JSON document the commands write). A report, a job report and a series get exactly what
``--format html/md/json`` writes. Keyword options given to :func:`render` reach the function:
``"report_page"`` takes ``trace=`` (the trace a single-trace report was computed from, for the
page's timeline, memory and counter plots).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceinsight.errors import TraceInsightError

KINDS = ("result_html", "report_html", "report_page", "report_markdown", "report_json")

_RENDERERS: dict[str, Callable[..., str]] = {}
# What loads the package's own presentation (it registers its views when imported), set by the
# package root: a report unpickled in a fresh process, or made by the analysis layer alone, has
# not imported it yet.
_loader: list[Callable[[], object]] = []


class NoRendererError(TraceInsightError, LookupError):
    """Nothing registered a view of this kind (the presentation package was not imported)."""


def set_loader(load: Callable[[], object]) -> None:
    """``load()`` imports the presentation that registers the views; called once, at the first
    lookup that finds none."""
    _loader[:] = [load]


def register(kind: str, fn: Callable[..., str]) -> None:
    """Make ``fn(obj, **options) -> str`` the view of ``kind``; a later registration replaces it."""
    if kind not in KINDS:
        raise ValueError(f"unknown display kind {kind!r}; choose from {', '.join(KINDS)}")
    _RENDERERS[kind] = fn


def render(kind: str, obj: Any, **options: Any) -> str:
    """The registered view of ``obj`` for ``kind``; ``options`` are passed on to its function."""
    fn = _RENDERERS.get(kind)
    if fn is None and kind in KINDS and _loader:
        _loader.pop()()  # once: what it registers stays (or is replaced by a later register)
        fn = _RENDERERS.get(kind)
    if fn is None:
        raise NoRendererError(
            f"no {kind} view registered: import the presentation package (traceinsight.render) first"
        )
    return fn(obj, **options)


def registered() -> tuple[str, ...]:
    return tuple(_RENDERERS)
