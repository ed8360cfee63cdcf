"""The lookups every format makes in the section view registry (``render/views.py``).

The first lookup imports ``render/sections/<name>.py`` for every registered analysis (a module
that registers the section's views when imported); a section without such a module is shown
by the generic view, one whose module fails to import is an error at every lookup.
"""

from __future__ import annotations

from importlib import import_module

from traceinsight.analysis.core.base import Result
from traceinsight.render import generic
from traceinsight.render.html.page import result_html
from traceinsight.render.shared import section_title
from traceinsight.render.views import (
    SPECS,
    SectionView,
    Table,
    ViewRegistryError,
    names,
    view_named,
)

# Where a section's views live: ``render/sections/<analysis name>.py``.
_VIEW_PACKAGE = "traceinsight.render.sections"

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
    view = view_named(type(result).name)
    if not isinstance(result, view.result_type):
        raise ViewRegistryError(f"the {type(result).name!r} views take a {view.result_type.__name__}, not a {type(result).__name__}")
    return view


def registered() -> tuple[str, ...]:
    _load()
    return names()


def section_html(result: Result) -> str:
    """A section's HTML body: its own view, else its figures (when available) above the
    generic facts and table."""
    view = view_of(result)
    if view.html is not None:
        return view.html(result)
    figures = view.figures(result) if view.figures is not None and result.available else []
    return result_html(result, figures)


def section_tables(result: Result) -> list[Table]:
    """A job section as tables: its own ``tables`` view, else the generic view's facts (as the
    note) and the head of its table."""
    view = view_of(result)
    if view.tables is not None:
        return view.tables(result)
    title = section_title(type(result).name)
    if not result.available:
        return [Table(title, (), (), result.reason or "not available")]
    gv = generic.view(result)
    note = "; ".join(f"{key}: {value}" for key, value in gv.facts)
    return [Table(title, gv.columns, gv.rows, note)]


def job_tables(sections: dict[str, Result]) -> list[Table]:
    """A job's shown sections as tables, in report order (each from its view)."""
    return [table for result in sections.values() for table in section_tables(result)]
