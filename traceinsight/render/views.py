"""The one registry of section views: how each format shows a section's result.

Keyed by the analysis's name (its spec's, which is its result class's ``name``): the module
``render/sections/<name>.py`` registers the section's views with :func:`register` when it is
imported. The lookups every format makes (``view_of``) live in ``render/section_views.py``,
which imports the view modules: this module imports none of them, so a view module importing
it is no cycle. A part left out falls back to the generic view (facts and the head of
``to_polars()``), so a new analysis is shown by every format without a view here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rich.console import RenderableType

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.job.specs import JOB_ANALYSES
from traceinsight.analysis.registry import ANALYSES
from traceinsight.render.html.page import Figure

R = TypeVar("R", bound=Result)


@dataclass(frozen=True)
class Table:
    """A format-neutral table of strings: what a job section shows, laid out by the terminal,
    Markdown and HTML formats alike (each adds nothing of its own to the numbers)."""

    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    note: str = ""


@dataclass(frozen=True)
class SectionView:
    """The views of one section, each taking the section's own result type.

    ``terminal``: the panel's body; ``markdown``: the section's lines under its heading;
    ``html``: the section's whole HTML body; ``figures``: plots above the generic HTML body
    (used when ``html`` is not given); ``tables``: a job section's tables, which every format
    lays out (the job report's terminal, Markdown and HTML).
    """

    result_type: type[Result] = Result
    terminal: Callable[[Any], RenderableType] | None = None
    markdown: Callable[[Any], list[str]] | None = None
    html: Callable[[Any], str] | None = None
    figures: Callable[[Any], list[Figure]] | None = None
    tables: Callable[[Any], list[Table]] | None = None


_GENERIC = SectionView()
# Every analysis a view may be registered for: the single-trace ones and the job ones.
SPECS = (*ANALYSES, *JOB_ANALYSES)
_VIEWS: dict[str, SectionView] = {}


class ViewRegistryError(RuntimeError):
    """A view registered under a name no analysis has, or for the wrong result type."""


def register(
    result_type: type[R],
    *,
    terminal: Callable[[R], RenderableType] | None = None,
    markdown: Callable[[R], list[str]] | None = None,
    html: Callable[[R], str] | None = None,
    figures: Callable[[R], list[Figure]] | None = None,
    tables: Callable[[R], list[Table]] | None = None,
) -> None:
    """Register the views of the section whose result is ``result_type``."""
    name = result_type.name
    if name not in {spec.name for spec in SPECS}:
        raise ViewRegistryError(f"views registered for {result_type.__name__}, whose name {name!r} is no registered analysis")
    _VIEWS[name] = SectionView(result_type, terminal, markdown, html, figures, tables)


def view_named(name: str) -> SectionView:
    """The views registered under ``name``, else the generic view's empty parts (no loading:
    ``section_views.view_of`` imports the view modules first)."""
    return _VIEWS.get(name, _GENERIC)


def names() -> tuple[str, ...]:
    """The sections that registered views so far."""
    return tuple(_VIEWS)
