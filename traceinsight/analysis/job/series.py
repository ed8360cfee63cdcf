"""A series of runs (a sweep of sizes, batch sizes, settings): one row per run and each run's
change against the first, judged with the same statistics as ``diff`` (bootstrap interval of
the median step ratio plus a rank test, ``traceinsight.analysis.lib.stats``).

A run is one trace or a whole job; a job's steps are merged across its ranks first
(:func:`merge_ranks`): a step lasts as long as its slowest rank (the job advances at that
pace), and its breakdown is the mean over the ranks.

The series report has three sections (``SERIES_SECTIONS``): ``runs`` (step times and the change
against run 0, with the plot), ``breakdown`` (compute, communication, idle per step) and
``findings`` (each run's top findings; the costly part, computed only when chosen).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Result, jsonable
from traceinsight.analysis.core.selection import choose_sections
from traceinsight.analysis.job.files import CommandFiles
from traceinsight.analysis.job.summary import (
    IDLE_CAUSES,
    KERNEL_MIX_SCHEMA,
    STEP_PARTS,
    STEP_SCHEMA,
    RankSummary,
)
from traceinsight.analysis.lib import stats

BREAKDOWN = tuple(f"part_{p}_ns" for p in STEP_PARTS)
ROW_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "run": pl.Int64,
    "path": pl.String,
    "ranks": pl.Int64,
    "steps": pl.Int64,
    "step_median_ns": pl.Float64,
    "step_mean_ns": pl.Float64,
    "compute_ns": pl.Float64,
    "communication_ns": pl.Float64,
    "exposed_comm_ns": pl.Float64,
    "comm_measured_on": pl.String,
    "idle_ns": pl.Float64,
    "copies_ns": pl.Float64,
    **{c: pl.Float64 for c in BREAKDOWN},
    "top_kernel": pl.String,
    "top_kernel_share": pl.Float64,
    "top_idle_cause": pl.String,
    "top_findings": pl.List(pl.String),
    "delta_median_ns": pl.Float64,
    "ratio": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "p_value": pl.Float64,
    "verdict": pl.String,
}

SERIES_SECTIONS: tuple[str, ...] = ("runs", "breakdown", "findings")
# The parts of a step in which the device works.
DEVICE_BUSY = ("kernel", "memcpy", "memset", "communication")
# Columns every row keeps, and those each section adds (the JSON's rows hold only these).
ID_COLUMNS = ("run", "path", "ranks", "steps")
SECTION_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("step_median_ns", "step_mean_ns", "delta_median_ns", "ratio", "ci_low", "ci_high", "p_value", "verdict"),
    "breakdown": (
        "compute_ns", "communication_ns", "exposed_comm_ns", "comm_measured_on", "idle_ns", "copies_ns", *BREAKDOWN,
        "top_kernel", "top_kernel_share", "top_idle_cause",
    ),
    "findings": ("top_findings",),
}  # fmt: skip


def select_series_sections(only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> tuple[str, ...]:
    """The series sections to show: all of them, or the ``only`` ones, less the ``skip`` ones."""
    return tuple(choose_sections(SERIES_SECTIONS, only, skip, what="series section"))


@dataclass(frozen=True)
class SeriesResult(CommandFiles, Result):
    """Per-step means per run (ns); ``ratio`` = median step of the run / of the first run.

    In Jupyter it displays as its HTML page does (plot and tables), through ``Result._repr_html_``.
    """

    name = "series"
    runs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ROW_SCHEMA))
    failed: tuple[str, ...] = ()  # runs that could not be read, one line each
    sections: tuple[str, ...] = SERIES_SECTIONS  # shown, in order; ``top_findings`` is null without "findings"
    # The section names given to ``only`` / ``skip`` (None: not given): the JSON envelope's
    # options, not part of this result's own dict.
    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] | None = None

    def to_polars(self) -> pl.DataFrame:
        return self.runs

    def __repr__(self) -> str:
        # Short at a Python prompt: the runs and the fastest, not the whole table.
        fastest = f"; fastest run {self.fastest}" if self.fastest is not None else ""
        failed = f", {len(self.failed)} failed" if self.failed else ""
        return f"<SeriesResult {self.runs.height} run(s){failed}{fastest}; sections: {', '.join(self.sections)}>"

    def to_dict(self) -> dict[str, Any]:
        """As every result, but each row holds only the columns of the chosen sections."""
        data = super().to_dict()
        del data["only"], data["skip"]
        kept = {*ID_COLUMNS, *(c for name in self.sections for c in SECTION_COLUMNS[name])}
        data["runs"] = jsonable(self.runs.select([c for c in self.runs.columns if c in kept]))
        return data

    @property
    def fastest(self) -> int | None:
        """The run with the shortest median step."""
        if self.runs.height == 0:
            return None
        return int(self.runs.sort("step_median_ns").row(0, named=True)["run"])


@dataclass(frozen=True)
class RunSummary:
    """One run of a series: its (merged) summary, its ranks and its top findings' titles."""

    summary: RankSummary
    ranks: int = 1
    findings: tuple[str, ...] = ()


def merge_ranks(summaries: Sequence[RankSummary], path: str) -> RankSummary:
    """One summary for a job: per step, the slowest rank's duration and the mean breakdown over
    the steps every rank has; kernel mixes summed."""
    if len(summaries) == 1:
        return replace(summaries[0], path=path)
    steps = pl.concat([s.steps for s in summaries], how="vertical")
    counted = steps.group_by("step").agg(pl.len().alias("_n"))
    shared = counted.filter(pl.col("_n") == len(summaries))["step"]
    numeric = [c for c in STEP_SCHEMA if c not in ("step", "start_ns", "end_ns", "dur_ns", "is_warmup")]
    merged = (
        steps.filter(pl.col("step").is_in(shared.implode()))
        .group_by("step")
        .agg(
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("dur_ns").max(),
            pl.col("is_warmup").any(),
            *[pl.col(c).mean().round(0) for c in numeric],
        )
        .sort("step")
        .select([pl.col(c).cast(t) for c, t in STEP_SCHEMA.items()])
    )
    mix = (
        pl.concat([s.kernel_mix for s in summaries], how="vertical")
        .group_by("name", "category")
        .agg(pl.col("count").sum(), pl.col("dur_ns").sum())
        .sort(["dur_ns", "name"], descending=[True, False])
        .select(list(KERNEL_MIX_SCHEMA))
    )
    return replace(summaries[0], path=path, steps=merged, kernel_mix=mix, collectives=summaries[0].collectives.clear())


def _analysed_steps(summary: RankSummary) -> pl.DataFrame:
    return summary.steps.filter(~pl.col("is_warmup")) if summary.steps.height > 1 else summary.steps


def analyze(
    runs: Sequence[RankSummary | RunSummary],
    config: AnalysisConfig | None = None,
    *,
    sections: Sequence[str] = SERIES_SECTIONS,
) -> SeriesResult:
    """One row per run against the first; ``top_findings`` is null unless ``sections`` holds
    "findings" (the caller computes the runs' findings only then)."""
    items = [r if isinstance(r, RunSummary) else RunSummary(r) for r in runs]
    shown = tuple(n for n in SERIES_SECTIONS if n in sections)
    if not items:
        return SeriesResult(available=False, reason="no run was analysed", sections=shown)
    base = _analysed_steps(items[0].summary)["dur_ns"].cast(pl.Float64)
    rows = []
    for i, item in enumerate(items):
        s = item.summary
        steps = _analysed_steps(s)
        durs = steps["dur_ns"].cast(pl.Float64)
        kernels = s.kernel_mix.filter(pl.col("category") == "compute")
        total_kernel = float(kernels["dur_ns"].sum() or 0)
        idle = {c: float(steps[f"idle_{c}_ns"].sum()) for c in IDLE_CAUSES}
        busy = pl.sum_horizontal(*[f"part_{p}_ns" for p in DEVICE_BUSY])
        idle_ns = steps.select((pl.col("dur_ns") - busy).cast(pl.Float64).mean()).item() if steps.height else None
        # Idle in gaps below the gaps' threshold only: named as such, as diff's table has it.
        top_cause = max(idle, key=lambda c: idle[c]) if any(idle.values()) else "short_gaps" if idle_ns else None
        cmp = stats.compare_samples(base.to_numpy(), durs.to_numpy())
        median = durs.median()
        base_median = base.median()
        rows.append(
            {
                "run": i,
                "path": s.path,
                "ranks": item.ranks,
                "steps": durs.len(),
                "step_median_ns": median,
                "step_mean_ns": durs.mean(),
                **{c: steps[c].cast(pl.Float64).mean() for c in ("communication_ns", "exposed_comm_ns", *BREAKDOWN)},
                # The step's own split (each instant once), as analyze's steps and diff have it:
                # compute, copies, device communication and idle add up to the step. Idle is all
                # of the device's time without work, gaps below the gaps' threshold included.
                "compute_ns": steps["part_kernel_ns"].cast(pl.Float64).mean(),
                "copies_ns": (steps["part_memcpy_ns"] + steps["part_memset_ns"]).cast(pl.Float64).mean(),
                "idle_ns": idle_ns,
                "comm_measured_on": s.comm_measured_on,
                "top_kernel": kernels["name"][0] if kernels.height else None,
                "top_kernel_share": float(kernels["dur_ns"][0]) / total_kernel if total_kernel else None,
                "top_idle_cause": top_cause,
                "top_findings": list(item.findings) if "findings" in shown else None,
                "delta_median_ns": (
                    float(median) - float(base_median)  # type: ignore[arg-type]
                    if median is not None and base_median is not None
                    else None
                ),
                "ratio": cmp.ratio,
                "ci_low": cmp.ci_low,
                "ci_high": cmp.ci_high,
                "p_value": cmp.p_value,
                "verdict": "baseline" if i == 0 else cmp.verdict,
            }
        )
    return SeriesResult(runs=pl.DataFrame(rows, schema=ROW_SCHEMA), sections=shown)
