"""traceinsight: turn PyTorch profiler traces into answers.

Analysis needs only polars; ``traceinsight.capture`` needs torch (the ``capture`` extra).
Heavy imports are lazy so that ``import traceinsight.capture`` works where polars is absent
(for example on a GPU box that only records traces).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from traceinsight.analysis.core import display as _display
from traceinsight.api import (
    analyze,
    analyze_memory_snapshot,
    compare,
    diff,
    load,
    load_job,
    load_memory_snapshot,
    merge_captures,
    whatif,
)
from traceinsight.version import __version__

if TYPE_CHECKING:
    from traceinsight.analysis.core.base import AnalysisConfig, Result
    from traceinsight.analysis.diff.compare import DiffResult
    from traceinsight.analysis.job.report import JobReport
    from traceinsight.analysis.job.series import SeriesResult
    from traceinsight.analysis.report import Report
    from traceinsight.analysis.sections.bound import BoundResult
    from traceinsight.analysis.sections.breakdown import BreakdownResult
    from traceinsight.analysis.sections.compile import CompileResult
    from traceinsight.analysis.sections.gaps import GapsResult
    from traceinsight.analysis.sections.kernels import KernelsResult
    from traceinsight.analysis.sections.memory import MemoryResult
    from traceinsight.analysis.sections.ops import OpsResult
    from traceinsight.analysis.sections.overview import OverviewResult
    from traceinsight.analysis.sections.steps import StepsResult
    from traceinsight.analysis.snapshot.report import SnapshotReport
    from traceinsight.analysis.whatif.model import WhatIfResult
    from traceinsight.analysis.whatif.section import CriticalPathResult
    from traceinsight.engine.job import Job
    from traceinsight.trace.model import Trace, TraceMeta
    from traceinsight.trace.snapshot.model import MemorySnapshot

# Public names resolved on first use, so that importing the package does not load polars.
_LAZY = {
    "AnalysisConfig": "traceinsight.analysis.core.base",
    "Result": "traceinsight.analysis.core.base",
    "Report": "traceinsight.analysis.report",
    "Trace": "traceinsight.trace.model",
    "TraceMeta": "traceinsight.trace.model",
    "DiffResult": "traceinsight.analysis.diff.compare",
    "BoundResult": "traceinsight.analysis.sections.bound",
    "BreakdownResult": "traceinsight.analysis.sections.breakdown",
    "CompileResult": "traceinsight.analysis.sections.compile",
    "GapsResult": "traceinsight.analysis.sections.gaps",
    "Job": "traceinsight.engine.job",
    "JobReport": "traceinsight.analysis.job.report",
    "SeriesResult": "traceinsight.analysis.job.series",
    "KernelsResult": "traceinsight.analysis.sections.kernels",
    "MemoryResult": "traceinsight.analysis.sections.memory",
    "OpsResult": "traceinsight.analysis.sections.ops",
    "OverviewResult": "traceinsight.analysis.sections.overview",
    "StepsResult": "traceinsight.analysis.sections.steps",
    "MemorySnapshot": "traceinsight.trace.snapshot.model",
    "SnapshotReport": "traceinsight.analysis.snapshot.report",
    "WhatIfResult": "traceinsight.analysis.whatif.model",
    "CriticalPathResult": "traceinsight.analysis.whatif.section",
}

__all__ = [
    "AnalysisConfig",
    "BoundResult",
    "BreakdownResult",
    "CompileResult",
    "CriticalPathResult",
    "DiffResult",
    "GapsResult",
    "Job",
    "JobReport",
    "KernelsResult",
    "MemoryResult",
    "MemorySnapshot",
    "OpsResult",
    "OverviewResult",
    "Report",
    "Result",
    "SeriesResult",
    "SnapshotReport",
    "StepsResult",
    "Trace",
    "TraceMeta",
    "WhatIfResult",
    "__version__",
    "analyze",
    "analyze_memory_snapshot",
    "compare",
    "diff",
    "load",
    "load_job",
    "load_memory_snapshot",
    "merge_captures",
    "whatif",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'traceinsight' has no attribute {name!r}")
    return getattr(import_module(module), name)


def _load_presentation() -> None:
    # The package root wires the analysis layer's display hooks to the package's own
    # presentation: the analysis layer cannot import it (render imports analysis).
    from traceinsight.render import notebook

    notebook.register()


_display.set_loader(_load_presentation)
