"""Run the registered analyses over a trace and keep their results in report order."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from traceinsight.analysis import display
from traceinsight.analysis.base import RESULT_SCHEMA_VERSION, AnalysisConfig, R, Result, jsonable
from traceinsight.analysis.job.common import given_names
from traceinsight.analysis.registry import ANALYSES
from traceinsight.analysis.runner import run_closure
from traceinsight.atomic import write_atomic
from traceinsight.errors import UsageError
from traceinsight.trace.model import Trace
from traceinsight.version import __version__

if TYPE_CHECKING:
    from traceinsight.analysis.headline import Headline

# Version of the JSON report's layout (top-level keys); each section carries its own.
REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Report:
    """The results of several analyses over one trace, keyed by section name, in order.

    ``report.gaps`` / ``report["gaps"]`` give a section's result object; ``headline`` is the
    plain-words verdict computed from them. Views (HTML, Markdown) come from the presentation
    package through :mod:`traceinsight.analysis.display`.
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

    def section(self, name: str, cls: type[R]) -> R | None:
        """The section ``name`` checked to be a ``cls`` (None when it was not run)."""
        result = self.sections.get(name)
        if result is not None and not isinstance(result, cls):
            raise TypeError(f"section {name!r} is a {type(result).__name__}, not a {cls.__name__}")
        return result

    @cached_property
    def headline(self) -> Headline:
        from traceinsight.analysis.headline import headline

        return headline(self.sections)

    def to_dict(self) -> dict[str, Any]:
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
        return display.render("report_markdown", self)

    def write_html(self, path: str | os.PathLike[str]) -> None:
        """Write the report as a self-contained HTML page."""
        write_atomic(display.render("report_page", self), path)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write ``to_dict()`` as JSON; the file appears whole or not at all."""
        write_atomic(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", path)


def select_sections(only: Iterable[str] | None, skip: Iterable[str] | None) -> list[str]:
    names = [spec.name for spec in ANALYSES if spec.kind == "trace"]
    only_list = [s.strip() for part in (only or []) for s in part.split(",") if s.strip()]
    skip_list = [s.strip() for part in (skip or []) for s in part.split(",") if s.strip()]
    unknown = sorted(set(only_list + skip_list) - set(names))
    if unknown:
        raise UsageError(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    chosen = [n for n in names if (not only_list or n in only_list) and n not in skip_list]
    return chosen


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
    including requirements that are not shown.
    """
    cfg = config or AnalysisConfig()
    only_names, skip_names = given_names(only), given_names(skip)
    chosen = select_sections(only_names, skip_names)
    results = run_closure(trace, cfg, chosen, on_section=on_section)
    sections = {name: results[name] for name in chosen}
    return Report(
        trace_path=trace.meta.path, sections=sections, config=cfg, only=only_names, skip=skip_names
    )
