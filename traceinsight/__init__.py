"""traceinsight: turn PyTorch profiler traces into answers.

Analysis needs only polars; ``traceinsight.capture`` needs torch (the ``capture`` extra).
Heavy imports are lazy so that ``import traceinsight.capture`` works where polars is absent
(for example on a GPU box that only records traces).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from traceinsight.api import analyze, compare, diff, load, load_job
from traceinsight.version import __version__

if TYPE_CHECKING:
    from traceinsight.analysis.base import AnalysisConfig, Result
    from traceinsight.analysis.bound import BoundResult
    from traceinsight.analysis.breakdown import BreakdownResult
    from traceinsight.analysis.compile import CompileResult
    from traceinsight.analysis.diff import DiffResult
    from traceinsight.analysis.gaps import GapsResult
    from traceinsight.analysis.job.report import JobReport
    from traceinsight.analysis.job.series import SeriesResult
    from traceinsight.analysis.kernels import KernelsResult
    from traceinsight.analysis.memory import MemoryResult
    from traceinsight.analysis.ops import OpsResult
    from traceinsight.analysis.overview import OverviewResult
    from traceinsight.analysis.report import Report
    from traceinsight.analysis.steps import StepsResult
    from traceinsight.engine.job import Job
    from traceinsight.trace.model import Trace, TraceMeta

# Public names resolved on first use, so that importing the package does not load polars.
_LAZY = {
    "AnalysisConfig": "traceinsight.analysis.base",
    "Result": "traceinsight.analysis.base",
    "Report": "traceinsight.analysis.report",
    "Trace": "traceinsight.trace.model",
    "TraceMeta": "traceinsight.trace.model",
    "DiffResult": "traceinsight.analysis.diff",
    "BoundResult": "traceinsight.analysis.bound",
    "BreakdownResult": "traceinsight.analysis.breakdown",
    "CompileResult": "traceinsight.analysis.compile",
    "GapsResult": "traceinsight.analysis.gaps",
    "Job": "traceinsight.engine.job",
    "JobReport": "traceinsight.analysis.job.report",
    "SeriesResult": "traceinsight.analysis.job.series",
    "KernelsResult": "traceinsight.analysis.kernels",
    "MemoryResult": "traceinsight.analysis.memory",
    "OpsResult": "traceinsight.analysis.ops",
    "OverviewResult": "traceinsight.analysis.overview",
    "StepsResult": "traceinsight.analysis.steps",
}

__all__ = [
    "AnalysisConfig",
    "BoundResult",
    "BreakdownResult",
    "CompileResult",
    "DiffResult",
    "GapsResult",
    "Job",
    "JobReport",
    "KernelsResult",
    "MemoryResult",
    "OpsResult",
    "OverviewResult",
    "Report",
    "Result",
    "SeriesResult",
    "StepsResult",
    "Trace",
    "TraceMeta",
    "__version__",
    "analyze",
    "compare",
    "diff",
    "load",
    "load_job",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'traceinsight' has no attribute {name!r}")
    return getattr(import_module(module), name)
