"""Run the registered analyses over a trace and keep their results in report order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from traceinsight import __version__
from traceinsight.analysis.base import RESULT_SCHEMA_VERSION, AnalysisConfig, Result, jsonable
from traceinsight.analysis.registry import ANALYSES
from traceinsight.errors import UsageError
from traceinsight.trace.model import Trace

if TYPE_CHECKING:
    from traceinsight.analysis.headline import Headline

# Version of the JSON report's layout (top-level keys); each section carries its own.
REPORT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Report:
    """The results of several analyses over one trace, keyed by section name, in order.

    ``report.gaps`` / ``report["gaps"]`` give a section's result object; ``headline`` is the
    plain-words verdict computed from them.
    """

    trace_path: str
    sections: dict[str, Result]
    config: AnalysisConfig

    def __getitem__(self, name: str) -> Result:
        return self.sections[name]

    def __getattr__(self, name: str) -> Result:
        sections = self.__dict__.get("sections", {})
        if name in sections:
            return sections[name]  # type: ignore[no-any-return]
        raise AttributeError(name)

    def __iter__(self) -> Any:
        return iter(self.sections)

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
        from traceinsight.analysis import display

        return display.render("report_html", self)


def select_sections(only: Iterable[str] | None, skip: Iterable[str] | None) -> list[str]:
    names = [spec.name for spec in ANALYSES]
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
    """Run every registered analysis (or the chosen ones) and return a :class:`Report`.

    ``on_section(name)`` is called before each analysis runs (progress display).
    """
    cfg = config or AnalysisConfig()
    chosen = select_sections(only, skip)
    sections: dict[str, Result] = {}
    for spec in ANALYSES:
        if spec.name in chosen:
            if on_section is not None:
                on_section(spec.name)
            sections[spec.name] = spec.run(trace, cfg)
    return Report(trace_path=trace.meta.path, sections=sections, config=cfg)
