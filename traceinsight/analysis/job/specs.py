"""Registry entries of the job analyses (``kind="job"``): thin wrappers over the pure functions.

A job spec (:data:`JobAnalysisSpec`) receives the job's rank summaries in place of a trace;
the job runner (:func:`run_job_closure`) calls them; this module is the job analyses' registry
(``CATALOG``), as ``analysis/registry.py`` is the single-trace analyses'.
``series`` takes the runs of a series the same way.

A new job analysis is its module in ``analysis/job/`` (a result, a pure function and a
``SPEC``, a ``JobAnalysisSpec``), one import and one entry in ``SPECS`` here, and its view
(``render/sections/<name>.py``, registering ``tables``): ``analyze`` of a job runs and shows it
in every format.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from traceinsight.analysis import registry as trace_registry
from traceinsight.analysis.core.base import AnalysisConfig, Inputs, Result, Spec
from traceinsight.analysis.core.registry import Catalog, RegistryError
from traceinsight.analysis.job import (
    collective_match,
    collectives,
    findings,
    ranks,
    series,
    stragglers,
)
from traceinsight.analysis.job.base import JobAnalysisSpec
from traceinsight.analysis.job.summary import RankSummary


def run_rank_table(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return ranks.analyze(list(summaries), config)


def run_stragglers(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return stragglers.analyze(list(summaries), config)


def run_collective_wait(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return collectives.analyze(list(summaries), config)


def run_collective_match(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return collective_match.analyze(list(summaries), config)


def run_job_findings(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return findings.analyze(
        inputs.get("rank_table", ranks.RankTableResult),
        inputs.get("stragglers", stragglers.StragglerResult),
        inputs.get("collective_wait", collectives.CollectiveWaitResult),
        list(summaries),
        matched=inputs.maybe("collective_match", collective_match.CollectiveMatchResult),
    )


def run_series(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> Result:
    return series.analyze(list(summaries), config)


SPECS = (
    JobAnalysisSpec(
        name="rank_table",
        title="Ranks",
        run=run_rank_table,
        description="Per rank: step time, compute, communication, exposed communication, idle by cause, collective wait.",
        kind="job",
    ),
    JobAnalysisSpec(
        name="stragglers",
        title="Stragglers",
        run=run_stragglers,
        description="Per step and overall, the rank the others wait for, and why.",
        kind="job",
    ),
    JobAnalysisSpec(
        name="collective_wait",
        title="Collective wait",
        run=run_collective_wait,
        description="Collectives matched across ranks: wait for the last arrival, skew, bus bandwidth.",
        kind="job",
    ),
    JobAnalysisSpec(
        name="collective_match",
        title="Collectives across ranks",
        run=run_collective_match,
        description=(
            "Each collective matched on every rank (process group and sequence number, else order), "
            "clocks aligned on them: arrival skew and the last rank, transfer, bus bandwidth against "
            "the link, overlap with compute, and what the late ranks were doing."
        ),
        kind="job",
    ),
    JobAnalysisSpec(
        name="job_findings",
        title="Job findings",
        run=run_job_findings,
        requires=("rank_table", "stragglers", "collective_wait", "collective_match"),
        description="Cross-rank findings (straggler, collective wait, exposed communication, imbalance), ranked by saving.",
        kind="job",
    ),
    JobAnalysisSpec(
        name="series",
        title="Series of runs",
        run=run_series,
        description="One row per run with its change against the first.",
        kind="job",
    ),
)

# What ``analyze(job)`` runs and shows, in report order (the order of SPECS): every job
# analysis but ``series``, which belongs to ``compare``.
JOB_SECTIONS: tuple[str, ...] = tuple(s.name for s in SPECS if s.name != "series")
CATALOG = Catalog(SPECS)
JOB_ANALYSES: tuple[Spec[Any], ...] = SPECS
_clash = {s.name for s in SPECS} & {s.name for s in trace_registry.ANALYSES}
if _clash:  # views, the JSON envelope and --only look analyses up by name, job and trace alike
    raise RegistryError(f"job and single-trace analyses share the names {sorted(_clash)}")


def run_job_closure(job: Sequence[Any] | Any, config: AnalysisConfig, names: Iterable[str]) -> dict[str, Result]:
    """Results of the job analyses ``names`` and of what they require, over ``job`` (its rank
    summaries), each once, in dependency order. Single-trace analyses are refused."""
    wanted = tuple(names)
    single = [n for n in wanted if n not in CATALOG.run_order and n in trace_registry.RUN_ORDER]
    if single:
        raise ValueError(f"analysis {single[0]!r} runs over one trace, not over a job")
    results: dict[str, Result] = {}
    # A job (anything with ``summaries``) or its rank summaries themselves.
    summaries = list(getattr(job, "summaries", job))
    for name in CATALOG.closure(wanted):
        spec = CATALOG.get(name)
        inputs = Inputs({r: results[r] for r in spec.requires if r in results})
        # A job spec's run takes the rank summaries in the trace's place (JobAnalysisSpec).
        results[name] = spec.run(summaries, config, inputs)
    return results
