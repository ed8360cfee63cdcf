"""The registry entry: ``run(trace, config, inputs)`` reads the required results and finds."""

from __future__ import annotations

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.findings.verdict.rank import find
from traceinsight.analysis.findings.verdict.together import FindingChanges, finding_changes
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.kernels import KernelsResult
from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.trace.model import Trace

REQUIRES = ("gaps", "breakdown", "steps", "ops", "kernels", "bound", "memory", "compile", "window")


def _context(trace: Trace, config: AnalysisConfig, inputs: Inputs) -> FindingContext:
    # The thresholds are the catalogue's; the config reaches the device model (peak overrides).
    return FindingContext(
        trace=trace,
        window=inputs.maybe("window", WindowResult),
        gaps=inputs.maybe("gaps", GapsResult),
        breakdown=inputs.maybe("breakdown", BreakdownResult),
        steps=inputs.maybe("steps", StepsResult),
        ops=inputs.maybe("ops", OpsResult),
        kernels=inputs.maybe("kernels", KernelsResult),
        bound=inputs.maybe("bound", BoundResult),
        memory=inputs.maybe("memory", MemoryResult),
        compile=inputs.maybe("compile", CompileResult),
        config=config,
        clock=config.clock != "traced",
    )


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> FindingsResult:
    return find(_context(trace, config, inputs))


def changes(trace: Trace, config: AnalysisConfig, inputs: Inputs, ids: tuple[str, ...]) -> FindingChanges:
    """The changes of the findings ``ids`` and the base they are priced on (``inputs``: the
    results of ``REQUIRES``), for ``whatif`` to replay together."""
    return finding_changes(_context(trace, config, inputs), ids)


SPEC = AnalysisSpec(
    name="findings",
    title="Findings",
    run=run,
    requires=REQUIRES,
    description="What to fix first: each finding with its estimated saving, method, confidence, fix and evidence",
)
