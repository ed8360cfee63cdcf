"""The format-neutral view of a diff: the rows every format shows, as text, with the change
that colours each row. The terminal, Markdown and HTML renderings take their rows from here and
add only layout, colour and markup, so the three say the same thing in the same words."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceinsight.analysis.diff.compare import DURATION_METRICS, DiffResult, StepTimeDiff
from traceinsight.analysis.diff.compile import CompileDiff
from traceinsight.analysis.diff.tables import TableDiff
from traceinsight.analysis.lib.stats import why_not_significant
from traceinsight.render.fit import shorten_middle
from traceinsight.render.units import ns, size

VERDICT_TEXT = {"faster": "faster", "slower": "slower", "no_significant_change": "no significant change"}
TOO_FEW = "not enough steps to test"
STATUS_WORD = {"added": "new", "removed": "gone"}


def not_significant_note(result: DiffResult) -> str | None:
    """Why a large change of the step time is not called significant (few steps, the test's
    floor, noisy steps), for the headline; None when the verdict is made or the change small."""
    st = result.step_time
    if result.verdict != "no_significant_change" or not st.available:
        return None
    return why_not_significant(
        st.n_before, st.n_after, st.ratio, st.ci_low, st.ci_high, st.p_value, alpha=round(1.0 - st.confidence, 6)
    )


def too_few_steps(result: DiffResult) -> bool:
    """True when a run has fewer kept steps than the test needs: then no verdict was made."""
    st = result.step_time
    return st.available and st.ratio is not None and min(st.n_before, st.n_after) < st.min_steps


@dataclass(frozen=True)
class Headline:
    """The diff's first line, the same words in every format: the verdict word, then the
    measured change, then (when no verdict was made) why, and the test behind it, unless that
    only repeats the why."""

    word: str
    change: str  # "after vs before: mean step −60.0 %", or ""
    why: str  # "2 and 2 steps; the test needs 3 per run", or ""
    reason: str  # the statistics behind the verdict, or "" where ``why`` already said it

    @property
    def text(self) -> str:
        out = self.word + (f": {self.change}" if self.change else "")
        return out + (f" ({self.why})" if self.why else "")


def headline(result: DiffResult) -> Headline:
    st = result.step_time
    change = f"{result.after_label} vs {result.before_label}: {st.statistic} step {change_pct(st.ratio)}" if st.ratio is not None else ""
    if too_few_steps(result):
        why = f"{st.n_before} and {st.n_after} kept steps; the test needs {st.min_steps} per run"
        return Headline(TOO_FEW, change, why, "")
    note = not_significant_note(result)
    return Headline(VERDICT_TEXT[result.verdict], change, f"not significant: {note}" if note else "", st.verdict_reason)


def signed_ns(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "−") + ns(abs(value))


def signed_size(value: float) -> str:
    sign = "+" if value > 0 else "−" if value < 0 else ""
    return f"{sign}{size(abs(value))}"


def change_pct(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    pct = (ratio - 1.0) * 100.0
    return f"{'+' if pct >= 0 else '−'}{abs(pct):.1f} %"


def ratio_of(before: float | None, after: float | None) -> float | None:
    """after / before, None when either is missing or before is 0."""
    return after / before if before and after is not None else None


def short(name: str, width: int = 70) -> str:
    return shorten_middle(name, width)


def metric_text(key: str, value: float | None) -> str:
    """A torch.compile metric's value: durations as times, the Triton share as a percentage."""
    if value is None:
        return "-"
    if key in DURATION_METRICS:
        return ns(value)
    if key == "triton_share":
        return f"{100 * value:.1f} %"
    return f"{value:,.1f}" if value != int(value) else f"{int(value):,}"


@dataclass(frozen=True)
class Row:
    """One row of text cells; ``delta`` is the change that colours its last cell (lower is
    better unless ``lower_is_better`` is False; None: no colour)."""

    cells: tuple[str, ...]
    delta: float | None = None
    lower_is_better: bool = True


def step_stats(st: StepTimeDiff) -> list[tuple[str, float | None, float | None]]:
    """The step statistics behind the verdict: (label, before, after) of the kept steps."""
    return [
        ("total of kept steps", st.before_total_ns, st.after_total_ns),
        ("mean", st.before_mean_ns, st.after_mean_ns),
        ("median", st.before_median_ns, st.after_median_ns),
        ("p90", st.before_p90_ns, st.after_p90_ns),
    ]


def step_rows(st: StepTimeDiff) -> list[Row]:
    """Steps kept, dropped and flagged, each statistic before and after with its change, then
    the interval and test behind the verdict."""
    rows = [
        Row(("steps kept", str(st.n_before), str(st.n_after), "")),
        Row(("dropped (warm-up/outliers)", str(st.dropped_before), str(st.dropped_after), "")),
        Row(("outliers kept (flagged)", str(st.outliers_before), str(st.outliers_after), "")),
    ]
    for label, bv, av in step_stats(st):
        ratio = ratio_of(bv, av)
        rows.append(Row((label, ns(bv), ns(av), change_pct(ratio)), None if ratio is None else ratio - 1))
    if st.ci_low is not None and st.ci_high is not None:
        rows.append(Row((f"{st.confidence:.0%} CI of {st.statistic} ratio", "", "", f"[{st.ci_low:.3f}, {st.ci_high:.3f}]")))
    if st.p_value is not None:
        rows.append(Row((st.test or "rank test", "", "", f"p = {st.p_value:.3g}")))
    return rows


def delta_rows(diff: TableDiff, key: str) -> list[Row]:
    """(key, before per step, after per step, change per step) of a per-category table."""
    rows = []
    for row in diff.table.iter_rows(named=True):
        delta = row["delta_ns_per_step"]
        # More compute per step is not "worse" in itself; idle and copies are.
        rows.append(Row((str(row[key]), ns(row["before_ns_per_step"]), ns(row["after_ns_per_step"]), signed_ns(delta)), delta))
    return rows


@dataclass(frozen=True)
class ContribRow:
    """A kernel, op or region that explains the delta."""

    names: tuple[str, ...]
    before: str
    after: str
    delta_text: str
    delta: float | None
    calls: str
    status: str  # "new", "gone" or ""


def contrib_rows(frame: pl.DataFrame, keys: list[str]) -> list[ContribRow]:
    return [
        ContribRow(
            names=tuple(str(row[k] or "") for k in keys),
            before=ns(row["before_ns_per_step"]),
            after=ns(row["after_ns_per_step"]),
            delta_text=signed_ns(row["delta_ns_per_step"]),
            delta=row["delta_ns_per_step"],
            calls=f"{row['before_calls_per_step']:.0f} → {row['after_calls_per_step']:.0f}",
            status=STATUS_WORD.get(row["status"], ""),
        )
        for row in frame.iter_rows(named=True)
    ]


def memory_rows(mem: TableDiff) -> list[Row]:
    return [
        Row((row["metric"], size(row["before"]), size(row["after"]), signed_size(row["delta"])), row["delta"])
        for row in mem.table.iter_rows(named=True)
    ]


def bound_changes(bound: TableDiff) -> list[tuple[str, str, str]]:
    """(region, label before, label after) of the regions whose bound label changed."""
    return [
        (row["region"], row["before_label"] or "-", row["after_label"] or "-")
        for row in bound.table.filter(pl.col("changed")).iter_rows(named=True)
    ]


def regions_in_both(bound: TableDiff) -> int:
    return bound.table.filter(pl.col("before_label").is_not_null() & pl.col("after_label").is_not_null()).height


def compile_rows(comp: CompileDiff) -> list[tuple[str, str, str]]:
    """(metric, before, after) of the torch.compile metrics either run has."""
    return [
        (row["metric"], metric_text(row["key"], row["before"]), metric_text(row["key"], row["after"]))
        for row in comp.metrics.iter_rows(named=True)
        if row["before"] is not None or row["after"] is not None
    ]


def region_speedups(comp: CompileDiff) -> list[tuple[str, float]]:
    """(compiled region, GPU time speedup) where both runs have the region."""
    if not comp.region_speedups.height:
        return []
    return [(row["region"], row["speedup"]) for row in comp.region_speedups.iter_rows(named=True) if row["speedup"] is not None]


@dataclass(frozen=True)
class KernelCounts:
    """Kernels and GPU time per step (or per trace, without steps), before and after."""

    unit: str
    kernels: str  # "a → b"
    gpu_before: str
    gpu_after: str
    gpu_delta: str


def kernel_counts(result: DiffResult) -> KernelCounts:
    kc = result.kernel_counts
    return KernelCounts(
        unit="step" if result.per == "step" else "trace",
        kernels=f"{kc.get('before_kernels_per_step', 0):.0f} → {kc.get('after_kernels_per_step', 0):.0f}",
        gpu_before=ns(kc.get("before_gpu_ns_per_step")),
        gpu_after=ns(kc.get("after_gpu_ns_per_step")),
        gpu_delta=signed_ns(result.gpu_delta_ns_per_step),
    )
