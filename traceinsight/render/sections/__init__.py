"""Dedicated terminal views of the sections, chosen by the result's type."""

from __future__ import annotations

from rich.console import RenderableType

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.kernels import KernelsResult
from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.analysis.sections.steps import StepsResult


def terminal_view(result: Result) -> RenderableType | None:
    """The section's own terminal view, or None for a result without one (generic view)."""
    from traceinsight.render.sections import (
        bound,
        breakdown,
        compile,
        findings,
        gaps,
        kernels,
        memory,
        ops,
        overview,
        steps,
    )

    if isinstance(result, OverviewResult):
        return overview.render_terminal(result)
    if isinstance(result, BreakdownResult):
        return breakdown.render_terminal(result)
    if isinstance(result, GapsResult):
        return gaps.render_terminal(result)
    if isinstance(result, StepsResult):
        return steps.render_terminal(result)
    if isinstance(result, OpsResult):
        return ops.render_terminal(result)
    if isinstance(result, KernelsResult):
        return kernels.render_terminal(result)
    if isinstance(result, MemoryResult):
        return memory.render_terminal(result)
    if isinstance(result, BoundResult):
        return bound.render_terminal(result)
    if isinstance(result, CompileResult):
        return compile.render_terminal(result)
    if isinstance(result, FindingsResult):
        return findings.render_terminal(result)
    return None
