"""Spec glue for the job analyses (``kind="job"``): thin wrappers over the pure functions.

A job-kind spec receives the job (its rank summaries) in place of a trace. This module needs
the spec base with ``requires``/``Inputs``; the analyses themselves do not.
"""

from __future__ import annotations

from typing import Any

from traceinsight.analysis.base import AnalysisConfig, AnalysisSpec, Result
from traceinsight.analysis.job import collectives, ranks, series, stragglers


def _summaries(job: Any) -> list[Any]:
    return list(getattr(job, "summaries", job))


def run_rank_table(job: Any, config: AnalysisConfig, inputs: Any) -> Result:
    return ranks.analyze(_summaries(job), config)


def run_stragglers(job: Any, config: AnalysisConfig, inputs: Any) -> Result:
    return stragglers.analyze(_summaries(job), config)


def run_collective_wait(job: Any, config: AnalysisConfig, inputs: Any) -> Result:
    return collectives.analyze(_summaries(job), config)


def run_series(job: Any, config: AnalysisConfig, inputs: Any) -> Result:
    return series.analyze(_summaries(job), config)


SPECS = (
    AnalysisSpec(  # type: ignore[call-arg]
        name="rank_table",
        title="Ranks",
        run=run_rank_table,  # type: ignore[arg-type]
        description="Per rank: step time, compute, communication, exposed communication, idle by cause, collective wait.",
        kind="job",
    ),
    AnalysisSpec(  # type: ignore[call-arg]
        name="stragglers",
        title="Stragglers",
        run=run_stragglers,  # type: ignore[arg-type]
        description="Per step and overall, the rank the others wait for, and why.",
        kind="job",
    ),
    AnalysisSpec(  # type: ignore[call-arg]
        name="collective_wait",
        title="Collective wait",
        run=run_collective_wait,  # type: ignore[arg-type]
        description="Collectives matched across ranks: wait for the last arrival, skew, bus bandwidth.",
        kind="job",
    ),
    AnalysisSpec(  # type: ignore[call-arg]
        name="series",
        title="Series of runs",
        run=run_series,  # type: ignore[arg-type]
        description="One row per run with its change against the first.",
        kind="job",
    ),
)
