"""The one registry of section views: how each format shows a section's result.

Keyed by the analysis's name (its spec's, which is its result class's ``name``): the module
``render/sections/<name>.py`` registers the section's views with :func:`register` when it is
imported (the first lookup imports one per registered analysis), and every format asks
:func:`view_of`. A part left out falls back to the generic view (facts and
the head of ``to_polars()``), so a new analysis is shown by every format without a view here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any, TypeVar

from rich.console import RenderableType

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.core.registry import SPECS
from traceinsight.render.html.page import Figure, result_html

R = TypeVar("R", bound=Result)


@dataclass(frozen=True)
class SectionView:
    """The views of one section, each taking the section's own result type.

    ``terminal``: the panel's body; ``markdown``: the section's lines under its heading;
    ``html``: the section's whole HTML body; ``figures``: plots above the generic HTML body
    (used when ``html`` is not given).
    """

    result_type: type[Result] = Result
    terminal: Callable[[Any], RenderableType] | None = None
    markdown: Callable[[Any], list[str]] | None = None
    html: Callable[[Any], str] | None = None
    figures: Callable[[Any], list[Figure]] | None = None


_GENERIC = SectionView()
_VIEWS: dict[str, SectionView] = {}

# Where a section's views live: ``render/sections/<analysis name>.py``. A section without such
# a module is shown by the generic view; one whose module fails to import is an error.
_VIEW_PACKAGE = "traceinsight.render.sections"


class ViewRegistryError(RuntimeError):
    """A view registered under a name no analysis has, or for the wrong result type."""


def register(
    result_type: type[R],
    *,
    terminal: Callable[[R], RenderableType] | None = None,
    markdown: Callable[[R], list[str]] | None = None,
    html: Callable[[R], str] | None = None,
    figures: Callable[[R], list[Figure]] | None = None,
) -> None:
    """Register the views of the section whose result is ``result_type``."""
    name = result_type.name
    if name not in {spec.name for spec in SPECS}:
        raise ViewRegistryError(f"views registered for {result_type.__name__}, whose name {name!r} is no registered analysis")
    _VIEWS[name] = SectionView(result_type, terminal, markdown, html, figures)


_loaded: list[bool] = []  # set once every section's view module was imported


def _load() -> None:
    # A view module imported on its own (a test, a notebook) registers only itself: the first
    # lookup still imports every section's module.
    if _loaded:
        return
    for spec in SPECS:
        qualified = f"{_VIEW_PACKAGE}.{spec.name}"
        try:
            import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name != qualified:
                raise
    # Marked only once every module imported: a view module that failed raises again at the
    # next lookup rather than leaving its section to the generic view from then on.
    _loaded.append(True)


def view_of(result: Result) -> SectionView:
    """The views of ``result``'s section (the generic view's empty parts when it has none)."""
    _load()
    view = _VIEWS.get(type(result).name, _GENERIC)
    if not isinstance(result, view.result_type):
        raise ViewRegistryError(f"the {type(result).name!r} views take a {view.result_type.__name__}, not a {type(result).__name__}")
    return view


def registered() -> tuple[str, ...]:
    _load()
    return tuple(_VIEWS)


def section_html(result: Result) -> str:
    """A section's HTML body: its own view, else its figures (when available) above the
    generic facts and table."""
    view = view_of(result)
    if view.html is not None:
        return view.html(result)
    figures = view.figures(result) if view.figures is not None and result.available else []
    return result_html(result, figures)
