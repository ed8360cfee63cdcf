"""What every format shows of a job or a series, as plain strings: the terminal, Markdown and
HTML renderers of jobs lay these out and add nothing of their own to the numbers."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from traceinsight.analysis.job.collectives import CollectiveWaitResult
from traceinsight.analysis.job.findings import JobFindingsResult
from traceinsight.analysis.job.ranks import RankTableResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.job.stragglers import StragglerResult
from traceinsight.analysis.lib.stats import MIN_SAMPLES, why_not_significant
from traceinsight.analysis.lib.words import run_labels
from traceinsight.render.units import ns, pct
from traceinsight.render.views import Table

Rows = Sequence[tuple[str, ...]]


def headline(report: JobReport) -> str:
    ranks = report.ranks
    steps = len(report.rank_table.steps_used)
    text = f"{len(ranks)} rank(s), {steps} common step(s)"
    s = report.stragglers
    if s.material and s.straggler is not None:
        text += f"; rank {s.straggler} is the straggler ({s.reason_text or s.reason}), the others lose {pct(100 * s.lost_share)} of the step time"
    elif s.available:
        text += "; no material straggler"
    return text


def failed_lines(report: JobReport) -> list[str]:
    return [f"rank {getattr(f, 'rank', '?')}: {getattr(f, 'error', f)}" for f in report.failed]


def rank_table(result: RankTableResult) -> Table:
    t = result.table
    rows = [
        (
            str(r["rank"]),
            ns(r["step_median_ns"]),
            ns(r["compute_ns"]),
            ns(r["communication_ns"]),
            ns(r["exposed_comm_ns"]),
            ns(r["idle_ns"]),
            ns(r["collective_wait_ns"]),
        )
        for r in t.iter_rows(named=True)
    ]
    note = "median device step; compute, communication, exposed communication, idle and collective wait are means per step"
    where = comm_note(t["comm_measured_on"].to_list(), [f"rank {r}" for r in t["rank"].to_list()])
    return Table(
        "Ranks (per step)",
        ("rank", "step", "compute", "comm", "exposed", "idle", "wait"),
        rows,
        f"{note}; {where}" if where else note,
    )


# Where communication was measured: what "comm" is, and what "exposed" is there.
_COMM_WHERE = {
    "device": ("comm = collective kernels on the device", "exposed = with no compute kernel running"),
    "host": ("comm = host-side collective spans (no collective kernels, e.g. gloo)", "exposed = with the GPU idle"),
}


def comm_note(measured_on: Sequence[str | None], labels: Sequence[object], *, exposed: bool = True) -> str:
    """Where communication was measured, for a table's note ("" when nowhere); ``exposed``
    adds what exposed communication means there. Rows measured in different places (or not at
    all: no collective) are named after ``labels``."""
    found = sorted({m for m in measured_on if m})
    if len(found) == 1 and all(measured_on):
        comm, hidden = _COMM_WHERE[found[0]]
        return f"{comm}, {hidden}" if exposed else comm
    return "; ".join(
        f"{_COMM_WHERE[m][0]} for {', '.join(str(x) for x, w in zip(labels, measured_on, strict=True) if w == m)}"
        for m in found
    )


def straggler_table(s: StragglerResult) -> Table:
    rows = [
        (str(r["part"]), ns(r["straggler_ns"]), ns(r["others_median_ns"]), ns(r["excess_ns"]))
        for r in s.excess_parts.head(5).iter_rows(named=True)
    ]
    if s.material and s.straggler is not None:
        note = f"rank {s.straggler} led {s.steps_led} of {len(s.steps_used)} steps; the others lose {ns(s.lost_ns)} in all"
    else:
        note = s.reason or "no rank holds the others back materially"
    return Table("Straggler: its own time per step", ("part", "straggler", "others", "excess"), rows, note)


def wait_table(w: CollectiveWaitResult) -> Table:
    rows = [
        (str(r["rank"]), str(r["collectives"]), ns(r["collective_ns"]), ns(r["wait_ns"]), pct(100 * (r["wait_share"] or 0.0)), str(r["last_arrivals"]))
        for r in w.per_rank.iter_rows(named=True)
    ]
    kinds = "; ".join(
        f"{r['collective']} ×{r['count']}" + (f": bus {r['busbw_median_gbps']:.0f} GB/s median" if r["busbw_median_gbps"] else "")
        for r in w.by_kind.iter_rows(named=True)
    )
    note = f"matched by {w.matched_by}" + (f"; {kinds}" if kinds else "") if w.available else (w.reason or "")
    return Table("Collective wait (whole trace)", ("rank", "colls", "time", "wait", "share", "last"), rows, note)


def findings_table(result: JobFindingsResult) -> Table:
    rows = [
        (f.id, "-" if f.evidence.rank is None else str(f.evidence.rank), pct(f.saving_pct), ns(f.saving_ns), f.confidence, f.title)
        for f in result.findings
    ]
    return Table("Job findings", ("id", "rank", "saving", "per step", "conf.", "what"), rows, "" if rows else "none material")


def finding_fixes(report: JobReport) -> list[str]:
    return [f"{f.id}: {f.fix}" for f in report.findings]


def step_grid(report: JobReport) -> tuple[list[int], list[int], dict[tuple[int, int], int]]:
    """Ranks, steps and the device step time (ns) of each (rank, step), over all steps."""
    frames = [s.steps.select("step", "dur_ns").with_columns(pl.lit(s.rank, pl.Int64).alias("rank")) for s in report.summaries]
    if not frames:
        return [], [], {}
    grid = pl.concat(frames, how="vertical")
    cells = {(int(r["rank"]), int(r["step"])): int(r["dur_ns"]) for r in grid.iter_rows(named=True)}
    return sorted({r for r, _ in cells}), sorted({s for _, s in cells}), cells


def stragglers_by_step(report: JobReport) -> dict[int, int]:
    per_step = report.stragglers.per_step
    if per_step.height == 0 or not report.stragglers.material:
        return {}
    return {int(r["step"]): int(r["straggler"]) for r in per_step.iter_rows(named=True) if r["straggler"] is not None}


def run_name(path: str) -> str:
    """A run's file or directory name (the full paths are in the JSON's ``inputs``)."""
    return path.rstrip("/").rsplit("/", 1)[-1] or path


def run_names(result: SeriesResult) -> list[str]:
    """Each run's label, by what differs between the runs' paths (as diff labels its two)."""
    return run_labels([str(p) for p in result.runs["path"].to_list()]) if result.runs.height else []


def series_table(result: SeriesResult) -> Table:
    rows = []
    names = run_names(result)
    base_steps = int(result.runs["steps"][0]) if result.runs.height else 0
    for r, name in zip(result.runs.iter_rows(named=True), names, strict=True):
        # As diff's headline: with too few steps no test was made, which is no "no change".
        few = r["verdict"] == "no_significant_change" and min(int(r["steps"]), base_steps) < MIN_SAMPLES
        ci = f"{r['ci_low']:.2f}–{r['ci_high']:.2f}" if r["ci_low"] is not None and r["ci_high"] is not None else "-"
        rows.append(
            (
                str(r["run"]),
                name,
                str(r["steps"]),
                ns(r["step_median_ns"]),
                ns(r["step_mean_ns"]),
                "-" if r["ratio"] is None else f"{r['ratio']:.2f}×",
                ci,
                "not enough steps" if few else str(r["verdict"]).replace("_", " "),
            )
        )
    return Table(
        "Runs (against run 0)",
        ("run", "trace", "steps", "median", "mean", "ratio", "95% CI", "verdict"),
        rows,
        "ratio = median step / run 0's; a verdict needs the bootstrap interval to exclude 1 and the rank test, as in diff",
    )


def series_breakdown(result: SeriesResult) -> Table:
    rows = [
        (
            str(r["run"]),
            ns(r["compute_ns"]),
            ns(r["copies_ns"]),
            ns(r["communication_ns"]),
            ns(r["idle_ns"]),
            str(r["top_idle_cause"] or "-"),
            "-" if r["delta_median_ns"] is None else ("+" if r["delta_median_ns"] > 0 else "") + ns(r["delta_median_ns"]),
        )
        for r in result.runs.iter_rows(named=True)
    ]
    runs = result.runs
    labels = [f"run {r}" for r in runs["run"].to_list()]
    where = comm_note(runs["comm_measured_on"].to_list(), labels, exposed=False) if runs.height else ""
    return Table("Breakdown per step", ("run", "compute", "copies", "comm", "idle", "idle mostly", "Δ median"), rows, where)


def series_findings(result: SeriesResult) -> Table:
    rows = [
        (str(r["run"]), title)
        for r in result.runs.iter_rows(named=True)
        for title in (r["top_findings"] or [])
    ]
    return Table("Top findings per run", ("run", "finding (saving)"), rows, "" if rows else "none material")


def series_tables(result: SeriesResult) -> list[Table]:
    """The tables of the chosen sections (``result.sections``), in report order."""
    views = {"runs": series_table, "breakdown": series_breakdown, "findings": series_findings}
    return [views[name](result) for name in result.sections]


def series_headline(result: SeriesResult) -> str:
    if result.runs.height == 0:
        return result.reason or "no run was analysed"
    fastest = result.fastest
    row = result.runs.filter(pl.col("run") == fastest).row(0, named=True)
    text = f"{result.runs.height} runs; fastest: run {fastest} ({run_names(result)[fastest or 0]}), median step {ns(row['step_median_ns'])}"
    return "; ".join([text, *unproven_changes(result)])


def unproven_changes(result: SeriesResult) -> list[str]:
    """One clause per run whose large change against run 0 is not significant, saying why."""
    rows = result.runs.sort("run").to_dicts()
    if not rows:
        return []
    base = rows[0]
    out = []
    for r in rows[1:]:
        if r["verdict"] != "no_significant_change":
            continue
        why = why_not_significant(base["steps"], r["steps"], r["ratio"], r["ci_low"], r["ci_high"], r["p_value"])
        if why:
            out.append(f"run {r['run']} {100 * (r['ratio'] - 1):+.1f} % by the median step, not significant: {why}")
    return out
