"""What every format shares about a report's sections: their titles and their order."""

from __future__ import annotations

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.job.specs import JOB_ANALYSES
from traceinsight.analysis.registry import ANALYSES


def section_title(name: str) -> str:
    for spec in (*ANALYSES, *JOB_ANALYSES):
        if spec.name == name:
            return spec.title
    return name


def ordered(sections: dict[str, Result]) -> list[tuple[str, Result]]:
    """The report's sections with findings first: reports lead with what to fix."""
    first = [(n, r) for n, r in sections.items() if n == FindingsResult.name]
    return first + [(n, r) for n, r in sections.items() if n != FindingsResult.name]
