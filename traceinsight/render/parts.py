"""Typed access to a report's sections for the renderers."""

from __future__ import annotations

from typing import TypeVar

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.report import Report

R = TypeVar("R", bound=Result)


def section_of(report: Report, cls: type[R]) -> R | None:
    """The report's section of type ``cls`` (looked up by ``cls.name``), or None when absent."""
    result = report.sections.get(cls.name)
    return result if isinstance(result, cls) else None
