"""Run a set of single-trace analyses with their requirements, each once, in dependency order."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from traceinsight.analysis.core.base import AnalysisConfig, Inputs, Result
from traceinsight.analysis.core.registry import RegistryError
from traceinsight.analysis.registry import RUN_ORDER, closure, get
from traceinsight.errors import AnalysisFailed, TraceInsightError
from traceinsight.trace.model import Trace


def run_closure(
    trace: Trace,
    config: AnalysisConfig,
    names: Iterable[str],
    *,
    on_section: Callable[[str], None] | None = None,
) -> dict[str, Result]:
    """Results of ``names`` and of everything they require, keyed by name, in run order.

    ``on_section(name)`` is
    called before each analysis that runs. An analysis that raises stops the run with
    :class:`~traceinsight.errors.AnalysisFailed` naming the trace and the analysis, whichever
    command asked (``analyze``, ``diff``, a job's ranks): one policy, no section quietly
    replaced by an error line.
    """
    wanted = tuple(names)
    unknown = [n for n in wanted if n not in RUN_ORDER]
    if unknown:  # a job analysis's name among them: it needs a job's ranks (job.specs.run_job_closure)
        raise ValueError(f"{unknown[0]!r} is no single-trace analysis")
    results: dict[str, Result] = {}
    for name in closure(wanted):
        spec = get(name)
        if on_section is not None:
            on_section(name)
        inputs = Inputs({r: results[r] for r in spec.requires if r in results})
        try:
            result = spec.run(trace, config, inputs)
        except TraceInsightError:
            raise  # already the user's problem, said in the analysis's own words
        except Exception as exc:
            raise AnalysisFailed(trace.meta.path, name, exc) from exc
        # Views, the JSON envelope and report.section() look results up by this name.
        if result.name != name:
            raise RegistryError(f"analysis {name!r} returned a {type(result).__name__} named {result.name!r}")
        results[name] = result
    return results


def compute_inputs(trace: Trace, config: AnalysisConfig, names: Iterable[str]) -> Inputs:
    """The results of ``names`` (and of what they need), computed once each, as the inputs of a
    direct call: ``bound.run(trace, config, compute_inputs(trace, config, bound.SPEC.requires))``."""
    wanted = tuple(names)
    if not wanted:
        return Inputs()
    results = run_closure(trace, config, wanted)
    return Inputs({name: results[name] for name in wanted})


def run_one(trace: Trace, name: str, config: AnalysisConfig | None = None) -> Result:
    """One registered analysis with its requirements computed first, as ``analyze`` runs it."""
    return run_closure(trace, config or AnalysisConfig(), (name,))[name]
