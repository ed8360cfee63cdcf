"""Registry entries of the job analyses (``kind="job"``): thin wrappers over the pure functions.

A job-kind spec receives the job (anything with ``summaries``, or a sequence of
:class:`RankSummary`) in place of a trace; the job runner (``runner.run_job_closure``) calls
them, the single-trace runner skips them. ``series`` takes the runs of a series the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceinsight.analysis.core.base import AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.job import collectives, findings, ranks, series, stragglers
from traceinsight.analysis.job.summary import RankSummary


def summaries_of(job: Any) -> list[RankSummary]:
    """The rank summaries of a job (an object with ``summaries``) or of a plain sequence."""
    items: Sequence[RankSummary] = getattr(job, "summaries", job)
    return list(items)


def run_rank_table(job: Any, config: AnalysisConfig, inputs: Inputs) -> Result:
    return ranks.analyze(summaries_of(job), config)


def run_stragglers(job: Any, config: AnalysisConfig, inputs: Inputs) -> Result:
    return stragglers.analyze(summaries_of(job), config)


def run_collective_wait(job: Any, config: AnalysisConfig, inputs: Inputs) -> Result:
    return collectives.analyze(summaries_of(job), config)


def run_job_findings(job: Any, config: AnalysisConfig, inputs: Inputs) -> Result:
    return findings.analyze(
        inputs.get("rank_table", ranks.RankTableResult),
        inputs.get("stragglers", stragglers.StragglerResult),
        inputs.get("collective_wait", collectives.CollectiveWaitResult),
    )


def run_series(job: Any, config: AnalysisConfig, inputs: Inputs) -> Result:
    return series.analyze(summaries_of(job), config)


SPECS = (
    AnalysisSpec(
        name="rank_table",
        title="Ranks",
        run=run_rank_table,
        description="Per rank: step time, compute, communication, exposed communication, idle by cause, collective wait.",
        kind="job",
    ),
    AnalysisSpec(
        name="stragglers",
        title="Stragglers",
        run=run_stragglers,
        description="Per step and overall, the rank the others wait for, and why.",
        kind="job",
    ),
    AnalysisSpec(
        name="collective_wait",
        title="Collective wait",
        run=run_collective_wait,
        description="Collectives matched across ranks: wait for the last arrival, skew, bus bandwidth.",
        kind="job",
    ),
    AnalysisSpec(
        name="job_findings",
        title="Job findings",
        run=run_job_findings,
        requires=("rank_table", "stragglers", "collective_wait"),
        description="Cross-rank findings (straggler, collective wait, exposed communication, imbalance), ranked by saving.",
        kind="job",
    ),
    AnalysisSpec(
        name="series",
        title="Series of runs",
        run=run_series,
        description="One row per run with its change against the first.",
        kind="job",
    ),
)

# What ``analyze(job)`` runs and shows, in report order; ``series`` belongs to ``compare``.
JOB_SECTIONS: tuple[str, ...] = ("rank_table", "stragglers", "collective_wait", "job_findings")
