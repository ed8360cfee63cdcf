"""Run the registered analyses over a trace and keep their results in report order."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from traceinsight.analysis.core import display
from traceinsight.analysis.core.base import (
    RESULT_SCHEMA_VERSION,
    AnalysisConfig,
    R,
    Result,
    jsonable,
)
from traceinsight.analysis.core.selection import choose_sections, given_names
from traceinsight.analysis.registry import ANALYSES
from traceinsight.analysis.runner import run_closure
from traceinsight.atomic import write_atomic
from traceinsight.trace.model import Trace
from traceinsight.version import __version__

if TYPE_CHECKING:
    from traceinsight.analysis.findings.verdict.headline import Headline

# Version of the JSON report's layout (top-level keys); each section carries its own.
REPORT_SCHEMA_VERSION = 1

# Where a report keeps the weak reference to the trace analyze() ran over.
_TRACE_REF = "_trace_ref"


@dataclass(frozen=True)
class Report:
    """The results of several analyses over one trace, keyed by section name, in order.

    ``report.gaps`` / ``report["gaps"]`` give a section's result object; ``headline`` is the
    plain-words verdict computed from them. Views (HTML, Markdown, the JSON document) come from
    the presentation package through :mod:`traceinsight.analysis.core.display`.

    A report from :func:`analyze` remembers its trace by a weak reference only (``trace``): it
    never keeps the frames alive by itself, and the reference is dropped when the report is
    pickled or copied.
    """

    trace_path: str
    sections: dict[str, Result]
    config: AnalysisConfig
    # The section names given to ``only`` / ``skip`` (None: not given); the JSON envelope's options.
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None

    def __getitem__(self, name: str) -> Result:
        return self.sections[name]

    def __getattr__(self, name: str) -> Result:
        sections = self.__dict__.get("sections", {})
        if name in sections:
            return sections[name]  # type: ignore[no-any-return]
        raise AttributeError(name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self.sections})

    def __iter__(self) -> Any:
        return iter(self.sections)

    def __repr__(self) -> str:
        # Short at a Python prompt: the verdict and the section names, not every frame's data.
        names = ", ".join(self.sections)
        return f"<Report {self.trace_path}: {self.headline.verdict!r}; sections: {names}>"

    def __getstate__(self) -> dict[str, Any]:
        # A weak reference cannot be pickled, and the trace is not sent along with the report.
        state = dict(self.__dict__)
        state.pop(_TRACE_REF, None)
        return state

    @property
    def trace(self) -> Trace | None:
        """The trace :func:`analyze` ran over, while something else still holds it; None once it
        is freed, after pickling or copying, and for a report built by hand."""
        ref: weakref.ref[Trace] | None = self.__dict__.get(_TRACE_REF)
        return ref() if ref is not None else None

    def section(self, name: str, cls: type[R]) -> R | None:
        """The section ``name`` checked to be a ``cls`` (None when it was not run)."""
        result = self.sections.get(name)
        if result is not None and not isinstance(result, cls):
            raise TypeError(f"section {name!r} is a {type(result).__name__}, not a {cls.__name__}")
        return result

    @cached_property
    def headline(self) -> Headline:
        from traceinsight.analysis.findings.verdict.headline import headline

        return headline(self.sections)

    def to_dict(self) -> dict[str, Any]:
        """The report's data: layout version 1 (``schema_version`` 1, the path under ``trace``).

        The files written by :meth:`write_json` and ``analyze --format json`` hold the same
        data in the envelope shared by every command (``schema_version`` 2, the path under
        ``inputs``, the ``only`` / ``skip`` choice under ``options``).
        """
        data: dict[str, Any] = {
            "schema_version": REPORT_SCHEMA_VERSION,
            "result_schema_version": RESULT_SCHEMA_VERSION,
            "traceinsight_version": __version__,
            "trace": self.trace_path,
            "config": self.config,
            "headline": self.headline.to_dict(),
            "sections": list(self.sections),
        }
        for name, result in self.sections.items():
            data[name] = result.to_dict()
        return jsonable(data)  # type: ignore[no-any-return]

    def _repr_html_(self) -> str:
        return display.render("report_html", self)

    def to_markdown(self) -> str:
        """The report as Markdown, as ``analyze --format md`` writes it."""
        return display.render("report_markdown", self)

    def write_html(self, path: str | os.PathLike[str], trace: Trace | None = None) -> None:
        """Write the self-contained HTML page ``analyze --format html`` writes; the file
        appears whole or not at all.

        The GPU timeline, memory and counter plots are drawn from ``trace`` (the trace this
        report was computed from), by default the one :func:`analyze` ran over if it is still
        alive (:attr:`trace`). Without either, the page says those plots are not available.
        """
        trace = trace if trace is not None else self.trace
        write_atomic(display.render("report_page", self, trace=trace), path)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write the JSON document ``analyze --format json`` writes (the envelope of
        ``kind: "report"``, not :meth:`to_dict`); the file appears whole or not at all."""
        write_atomic(display.render("report_json", self), path)


def select_sections(only: Iterable[str] | None, skip: Iterable[str] | None) -> list[str]:
    """The single-trace sections to show, in report order (an unknown name is a usage error)."""
    return choose_sections([spec.name for spec in ANALYSES], only, skip, what="section")


def analyze(
    trace: Trace,
    config: AnalysisConfig | None = None,
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
    on_section: Callable[[str], None] | None = None,
) -> Report:
    """Run every registered single-trace analysis (or the chosen ones) and return a :class:`Report`.

    The chosen sections and what they require run once each, in dependency order; the report
    shows only the chosen ones. Specs of ``kind="job"`` (several traces) are not run here.
    ``on_section(name)`` is called before each analysis that runs (progress display),
    including requirements that are not shown. The report refers to ``trace`` weakly
    (``report.trace``), for the plots of :meth:`Report.write_html`.
    """
    cfg = config or AnalysisConfig()
    only_names, skip_names = given_names(only), given_names(skip)
    chosen = select_sections(only_names, skip_names)
    results = run_closure(trace, cfg, chosen, on_section=on_section)
    sections = {name: results[name] for name in chosen}
    report = Report(
        trace_path=trace.meta.path, sections=sections, config=cfg, only=only_names, skip=skip_names
    )
    # Not a field: equality, repr, to_dict and dataclasses.replace leave it out.
    object.__setattr__(report, _TRACE_REF, weakref.ref(trace))
    return report
