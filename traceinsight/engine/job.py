"""``load_job``: the ranks of one job analysed where they are, as a :class:`Job`.

Each rank file is loaded in a worker (through the per-file Parquet cache) and reduced to a
:class:`RankSummary`; the parent holds only those. The full frames stay queryable lazily:
``job.scan("kernels")`` scans every rank's cached Parquet with a ``rank`` column, and
``job.sql(...)`` runs polars SQL over those scans, so a job larger than memory can be queried.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.job.report import JobReport, analyze_job
from traceinsight.analysis.job.series import RunSummary, SeriesResult
from traceinsight.analysis.job.summary import RankSummary, summarize
from traceinsight.engine.run import Engine, run_per_rank
from traceinsight.engine.tasks import TaskOutcome
from traceinsight.errors import TraceInsightError, UsageError
from traceinsight.trace.discover import JobSpec, RankFile, fetch
from traceinsight.trace.inputs import is_single_trace
from traceinsight.trace.layout import discover
from traceinsight.trace.schema import FRAME_SCHEMAS


class JobLoadError(TraceInsightError):
    """No rank of the job could be loaded: nothing to analyse or query."""


@dataclass(frozen=True)
class FailedRank:
    rank: int
    path: str
    error: str


def summarize_file(rank_file: RankFile, config: AnalysisConfig | None = None, cache: bool = True) -> RankSummary:
    """Load one rank's trace (fetching a URL first) and reduce it to its summary; runs in a
    worker. The cache entry is recorded so that the parent can scan the frames lazily."""
    from traceinsight.trace import cache as trace_cache
    from traceinsight.trace.loader import load

    local = fetch(rank_file.path)
    # The ranks already share the cores between them: one process per rank's decode.
    trace = load(local, cache=cache, workers=1)
    summary = summarize(trace, rank=rank_file.rank, config=config)
    entry = trace_cache.entry_dir(local) if cache else None
    return replace(
        summary,
        path=rank_file.path,
        cache_entry=str(entry) if entry is not None and entry.is_dir() else None,
    )


@dataclass(frozen=True)
class Job:
    """The ranks of one job: their summaries, the ranks that failed, lazy frames over all."""

    spec: JobSpec
    summaries: tuple[RankSummary, ...]
    failed: tuple[FailedRank, ...] = ()
    config: AnalysisConfig = field(default_factory=AnalysisConfig)

    @property
    def ranks(self) -> list[int]:
        """The ranks that were analysed (failed ones are in ``failed``)."""
        return [s.rank for s in self.summaries]

    @property
    def world_size(self) -> int:
        return self.spec.world_size

    def summary(self, rank: int) -> RankSummary:
        for s in self.summaries:
            if s.rank == rank:
                return s
        raise KeyError(f"rank {rank} is not among the analysed ranks {self.ranks}")

    def scan(self, frame: str = "kernels") -> pl.LazyFrame:
        """One frame of every rank (``events``, ``kernels``, ``counters``, ``memory``) as a lazy
        scan of the Parquet cache, with a ``rank`` column first; categoricals as strings."""
        if frame not in FRAME_SCHEMAS:
            raise UsageError(f"unknown frame {frame!r}; choose from {', '.join(FRAME_SCHEMAS)}")
        if not self.summaries:
            raise JobLoadError(no_rank_loaded(self.spec, self.failed))
        missing = [s.path for s in self.summaries if not s.cache_entry]
        if missing:
            raise TraceInsightError(
                f"{missing[0]}: no Parquet cache entry to scan (load the job with cache=True)"
            )
        cats = [c for c, t in FRAME_SCHEMAS[frame].items() if t == pl.Categorical or isinstance(t, pl.Enum)]
        scans = [
            pl.scan_parquet(Path(str(s.cache_entry)) / f"{frame}.parquet").select(
                pl.lit(s.rank, pl.Int64).alias("rank"),
                pl.exclude(cats),
                *[pl.col(c).cast(pl.String) for c in cats],
            )
            for s in self.summaries
        ]
        order = ["rank", *FRAME_SCHEMAS[frame]]
        return pl.concat(scans, how="vertical").select(order)

    def sql(self, query: str, *, eager: bool = True) -> Any:
        """Polars SQL over the tables ``events``, ``kernels``, ``counters``, ``memory`` (each
        with a ``rank`` column), read lazily from the cache."""
        tables = {name: self.scan(name) for name in FRAME_SCHEMAS}
        return pl.SQLContext(tables, eager=eager).execute(query)

    def analyze(
        self,
        config: AnalysisConfig | None = None,
        *,
        only: Sequence[str] | None = None,
        skip: Sequence[str] | None = None,
    ) -> JobReport:
        """The job sections (registry specs of ``kind="job"``) over this job: a :class:`JobReport`."""
        return analyze_job(list(self.summaries), config or self.config, failed=self.failed, only=only, skip=skip)

    def __repr__(self) -> str:
        failed = f", failed={[f.rank for f in self.failed]}" if self.failed else ""
        return f"Job({self.spec.name!r}, world_size={self.world_size}, ranks={len(self.summaries)}{failed})"


def load_job(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    jobs: int | None = None,
    engine: Engine | str = "local",
    address: str | None = None,
    config: AnalysisConfig | None = None,
    allow_missing: bool = False,
    timeout_s: float | None = None,
    cache: bool = True,
    cycle: int | str = "latest",
) -> Job:
    """Discover the rank traces in ``source`` (a directory, a glob, files or URLs), analyse
    each where it is (``engine``: "local" process pool, "ray", or "serial" in this process)
    and return the :class:`Job`. A rank that fails is listed in ``job.failed``; when none
    could be loaded, :class:`JobLoadError` says why for each.

    Several profiler cycles in ``source``: the latest, or the ``cycle``-th (1 the oldest,
    -1 the latest); ``job.spec.warnings`` says which was taken."""
    spec = discover(source, allow_missing=allow_missing, cycle=cycle)
    cfg = config or AnalysisConfig()
    work = functools.partial(summarize_file, config=cfg, cache=cache)
    outcomes: list[TaskOutcome[RankSummary]] = run_per_rank(
        list(spec.ranks), work, engine=engine, jobs=jobs, address=address, timeout_s=timeout_s
    )
    summaries = tuple(o.value for o in outcomes if o.value is not None)
    failed = tuple(
        FailedRank(spec.ranks[o.index].rank, spec.ranks[o.index].path, o.error or "unknown error")
        for o in outcomes
        if o.value is None
    )
    if not summaries:
        raise JobLoadError(no_rank_loaded(spec, failed))
    return Job(spec=spec, summaries=summaries, failed=failed, config=cfg)


def no_rank_loaded(spec: JobSpec, failed: Sequence[FailedRank]) -> str:
    """One line: no rank of the job loaded, and the first reasons."""
    name = spec.name or (spec.paths[0] if spec.paths else "the job")
    reasons = "; ".join(
        f"rank {f.rank}: {f.error if f.path in f.error else f'{f.path}: {f.error}'}" for f in list(failed)[:2]
    )
    more = f" (+{len(failed) - 2} more)" if len(failed) > 2 else ""
    return f"no rank of {name} could be loaded: {reasons or 'no rank files'}{more}"


TOP_FINDINGS = 3


def _titles(findings: Sequence[Any]) -> tuple[str, ...]:
    return tuple(f"{f.title} ({f.saving_pct:.0f} %)" for f in list(findings)[:TOP_FINDINGS])


def summarize_run(
    rank_file: RankFile, config: AnalysisConfig | None = None, cache: bool = True, findings: bool = True
) -> RunSummary:
    """One single-trace run of a series: its summary and (with ``findings``) its top findings;
    runs in a worker."""
    from traceinsight.analysis.findings.model import FindingsResult
    from traceinsight.analysis.report import analyze
    from traceinsight.trace.loader import load

    trace = load(fetch(rank_file.path), cache=cache, workers=1)
    summary = replace(summarize(trace, rank=rank_file.rank, config=config), path=rank_file.path)
    if not findings:
        return RunSummary(summary, ranks=1)
    found = analyze(trace, config, only=["findings"]).sections.get("findings")
    titles = _titles(found.findings) if isinstance(found, FindingsResult) else ()
    return RunSummary(summary, ranks=1, findings=titles)


def _trace_findings(path: str, config: AnalysisConfig, cache: bool) -> tuple[str, ...]:
    """The top findings of one trace, as ``analyze`` ranks them."""
    from traceinsight.analysis.findings.model import FindingsResult
    from traceinsight.analysis.report import analyze
    from traceinsight.trace.loader import load

    found = analyze(load(fetch(path), cache=cache, workers=1), config, only=["findings"]).sections.get("findings")
    return _titles(found.findings) if isinstance(found, FindingsResult) else ()


def load_series(
    runs: Sequence[str | os.PathLike[str] | Sequence[str | os.PathLike[str]]],
    *,
    jobs: int | None = None,
    engine: Engine | str = "local",
    address: str | None = None,
    config: AnalysisConfig | None = None,
    timeout_s: float | None = None,
    cache: bool = True,
    only: Sequence[str] | None = None,
    skip: Sequence[str] | None = None,
) -> SeriesResult:
    """Several runs compared with the first, in the order given: a :class:`SeriesResult`.

    A run is a trace file, or a job (a directory, a glob or a list of rank files), merged
    across its ranks. Runs that cannot be read are left out and listed in ``failed``.
    ``only`` / ``skip`` choose the report's sections (``runs``, ``breakdown``, ``findings``);
    without ``findings`` no run's findings are computed."""
    from traceinsight.analysis.core.selection import given_names
    from traceinsight.analysis.job.series import analyze as analyze_series
    from traceinsight.analysis.job.series import merge_ranks, select_series_sections

    sections = select_series_sections(only, skip)
    with_findings = "findings" in sections
    cfg = config or AnalysisConfig()
    singles = [
        (i, RankFile(os.fspath(run), i, rank_from="order"))
        for i, run in enumerate(runs)
        if isinstance(run, (str, os.PathLike)) and is_single_trace(run)
    ]
    work = functools.partial(summarize_run, config=cfg, cache=cache, findings=with_findings)
    outcomes = run_per_rank([f for _, f in singles], work, engine=engine, jobs=jobs, address=address, timeout_s=timeout_s)
    found: dict[int, RunSummary] = {}
    failed: list[str] = []
    for (i, f), outcome in zip(singles, outcomes, strict=True):
        if outcome.value is not None:
            found[i] = outcome.value
        else:
            failed.append(f"{f.path}: {outcome.error}")
    for i, run in enumerate(runs):
        if i in found or any(i == j for j, _ in singles):
            continue
        try:
            job = load_job(run, jobs=jobs, engine=engine, address=address, config=cfg, timeout_s=timeout_s, cache=cache)
        except JobLoadError as exc:
            failed.append(str(exc))
            continue
        failed.extend(f"{f.path}: {f.error}" for f in job.failed)
        if not with_findings:
            titles: tuple[str, ...] = ()
        elif len(job.summaries) == 1:
            # One process's folder (a tensorboard_trace_handler directory): its findings are
            # the trace's own, as analyze gives them for the same folder; the cross-rank ones
            # need ranks to compare.
            titles = _trace_findings(job.summaries[0].path, cfg, cache)
        else:
            titles = _titles(job.analyze().findings)
        label = os.fspath(run) if isinstance(run, (str, os.PathLike)) else (job.spec.name or job.spec.paths[0])
        found[i] = RunSummary(merge_ranks(job.summaries, label), ranks=len(job.summaries), findings=titles)
    result = analyze_series([found[i] for i in sorted(found)], cfg, sections=sections)
    result = replace(result, only=given_names(only), skip=given_names(skip))
    if failed:
        return replace(result, failed=tuple(failed), reason="; ".join(failed))
    return result
