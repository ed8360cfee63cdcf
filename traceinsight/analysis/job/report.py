"""All cross-rank analyses of one job, run through the registry's job runner, and the
findings they support (``analysis.job.findings``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from traceinsight.analysis.core import display
from traceinsight.analysis.core.base import AnalysisConfig, Inputs, Result, jsonable
from traceinsight.analysis.core.selection import choose_sections, given_names
from traceinsight.analysis.findings.model import Finding
from traceinsight.analysis.job import collectives, ranks, stragglers
from traceinsight.analysis.job.files import CommandFiles
from traceinsight.analysis.job.findings import JobFindingsResult
from traceinsight.analysis.job.specs import JOB_SECTIONS
from traceinsight.analysis.job.summary import RankSummary


@dataclass(frozen=True)
class JobReport(CommandFiles):
    """The job's sections by name (``sections``), with typed access to the usual ones."""

    rank_table: ranks.RankTableResult
    stragglers: stragglers.StragglerResult
    collective_wait: collectives.CollectiveWaitResult
    job_findings: JobFindingsResult = field(default_factory=JobFindingsResult)
    failed: tuple[Any, ...] = ()
    sections: dict[str, Result] = field(default_factory=dict)
    paths: tuple[str, ...] = ()  # the rank files, in rank order
    summaries: tuple[RankSummary, ...] = field(default=(), repr=False, compare=False)
    # The section names given to ``only`` / ``skip`` (None: not given); the JSON envelope's options.
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.job_findings.findings

    def __repr__(self) -> str:
        # Short at a Python prompt: ranks, findings and section names, not every frame's data.
        failed = f", {len(self.failed)} failed" if self.failed else ""
        return (
            f"<JobReport {len(self.paths) or len(self.summaries)} rank(s){failed}; "
            f"{len(self.findings)} finding(s); sections: {', '.join(self.sections)}>"
        )

    @property
    def ranks(self) -> list[int]:
        return [s.rank for s in self.summaries]

    def _repr_html_(self) -> str:
        """Rich display in Jupyter: what the job's HTML page shows (heatmap, tables)."""
        return display.render("report_html", self)

    def to_dict(self) -> dict[str, Any]:
        """The shown sections by name, ``findings`` (when ``job_findings`` is shown) and the
        ranks that ``failed``."""
        data: dict[str, Any] = {name: result.to_dict() for name, result in self.sections.items()}
        if "job_findings" in self.sections:
            data["findings"] = [jsonable(f) for f in self.findings]
        data["failed"] = jsonable(list(self.failed))
        return data


def select_job_sections(only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> list[str]:
    """The job sections to show: all of them, or the ``only`` ones, less the ``skip`` ones."""
    return choose_sections(JOB_SECTIONS, only, skip, what="job section")


def analyze_job(
    summaries: Sequence[RankSummary],
    config: AnalysisConfig | None = None,
    *,
    failed: Sequence[Any] = (),
    only: Iterable[str] | None = None,
    skip: Iterable[str] | None = None,
) -> JobReport:
    """Run the job sections (or the ``only`` ones, less the ``skip`` ones, with what they need)
    over the rank summaries."""
    from traceinsight.analysis.job.specs import run_job_closure

    cfg = config or AnalysisConfig()
    only_names, skip_names = given_names(only), given_names(skip)
    names = select_job_sections(only_names, skip_names)
    results = run_job_closure(list(summaries), cfg, names)
    shown = {n: results[n] for n in JOB_SECTIONS if n in results and n in names}
    got = Inputs(results)  # typed reads of the results
    return JobReport(
        rank_table=got.maybe("rank_table", ranks.RankTableResult) or ranks.RankTableResult(available=False),
        stragglers=got.maybe("stragglers", stragglers.StragglerResult) or stragglers.StragglerResult(available=False),
        collective_wait=got.maybe("collective_wait", collectives.CollectiveWaitResult) or collectives.CollectiveWaitResult(available=False),
        job_findings=got.maybe("job_findings", JobFindingsResult) or JobFindingsResult(available=False),
        failed=tuple(failed),
        sections=shown,
        paths=tuple(s.path or "" for s in summaries),
        summaries=tuple(summaries),
        only=only_names,
        skip=skip_names,
    )
