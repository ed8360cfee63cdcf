"""Before/after comparison of two traces: did the change help, by how much, and why.

Alignment:

- steps: the step analysis marks warm-up and outlier steps; warm-up steps are dropped, outliers
  are kept and counted (``drop_outliers`` drops them too), and the kept steps are compared as
  two samples of device step time (host step time when a side has no GPU work). Kept steps are paired by position for the per-step table only; the verdict does
  not assume pairing.
- ops by top-level op name and input shapes, kernels by name (with their family), regions by
  annotation name; each side's GPU time is divided by its number of kept steps, so runs of
  different lengths compare. Without steps, per-trace totals are compared and said so.
- breakdown and idle-by-cause figures are means over the kept steps' device windows, the
  denominator of the step-time table (without steps: the whole window / profiled steps).

The verdict is "faster"/"slower" only when the bootstrap interval of the ratio of mean step
times (total time of the kept steps over their number) excludes 1 AND the rank test gives
p < alpha (see :mod:`traceinsight.analysis.lib.stats`): a stall every few steps cannot hide from
the mean as it can from the median.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.diff.compile import DURATION_METRICS, CompileDiff, compile_diff
from traceinsight.analysis.diff.contrib import (
    CONTRIBUTION_SCHEMA,
    contributions,
    kernel_frame,
    op_frame,
    region_frame,
)
from traceinsight.analysis.diff.findings import FindingsDiff, compare_findings
from traceinsight.analysis.diff.side import NO_ANNOTATION, NO_OP, DiffOptions, Side, make_side
from traceinsight.analysis.diff.steps import StepTimeDiff, Verdict, compare_steps
from traceinsight.analysis.diff.tables import (
    TableDiff,
    bound_table,
    breakdown_table,
    idle_by_cause,
    memory_table,
)
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.lib.words import run_labels
from traceinsight.trace.model import Trace

__all__ = [
    "CONTRIBUTION_SCHEMA",
    "DURATION_METRICS",
    "NO_ANNOTATION",
    "NO_OP",
    "CompileDiff",
    "DiffOptions",
    "DiffResult",
    "StepTimeDiff",
    "TableDiff",
    "Verdict",
    "compare_steps",
    "contributions",
    "diff_traces",
    "label_for",
]


@dataclass(frozen=True)
class DiffResult(Result):
    name = "diff"
    before_label: str = "before"
    after_label: str = "after"
    before_path: str = ""
    after_path: str = ""
    verdict: Verdict = "no_significant_change"
    per: str = "step"
    before_steps: int = 0
    after_steps: int = 0
    before_device: str | None = None
    after_device: str | None = None
    comparable: bool = True
    notes: tuple[str, ...] = ()
    step_time: StepTimeDiff = field(default_factory=StepTimeDiff)
    kernel_counts: dict[str, float] = field(default_factory=dict)
    breakdown: TableDiff = field(default_factory=TableDiff)
    idle_by_cause: TableDiff = field(default_factory=TableDiff)
    ops: pl.DataFrame = field(default_factory=pl.DataFrame)
    kernels: pl.DataFrame = field(default_factory=pl.DataFrame)
    regions: pl.DataFrame = field(default_factory=pl.DataFrame)
    added_kernels: tuple[str, ...] = ()
    removed_kernels: tuple[str, ...] = ()
    added_kernel_count: int = 0
    removed_kernel_count: int = 0
    gpu_delta_ns_per_step: float | None = None
    bound: TableDiff = field(default_factory=TableDiff)
    memory: TableDiff = field(default_factory=TableDiff)
    compile: CompileDiff = field(default_factory=lambda: CompileDiff(available=False, reason="not computed"))
    findings: FindingsDiff = field(default_factory=lambda: FindingsDiff(available=False, reason="not computed"))

    def to_polars(self) -> pl.DataFrame:
        return self.kernels

    def is_regression(self, threshold_pct: float) -> bool:
        """True when the after run is significantly slower by more than ``threshold_pct`` %."""
        ratio = self.step_time.ratio
        return self.verdict == "slower" and ratio is not None and (ratio - 1.0) * 100.0 > threshold_pct


def _device_name(trace: Trace) -> str | None:
    used = trace.gpu_devices
    names = [d.name for d in trace.meta.devices if not used or d.id in used]
    return ", ".join(sorted(set(names))) if names else None


def _device_notes(before: Side, after: Side) -> tuple[bool, list[str], str | None, str | None]:
    b_name, a_name = _device_name(before.trace), _device_name(after.trace)
    notes: list[str] = []
    comparable = True
    if before.trace.has_gpu != after.trace.has_gpu:
        comparable = False
        missing = before.label if not before.trace.has_gpu else after.label
        notes.append(f"{missing} has no GPU activity: GPU figures are one-sided")
    elif b_name and a_name and b_name != a_name:
        comparable = False
        notes.append(
            f"devices differ ({b_name} vs {a_name}): absolute kernel times and step times "
            "reflect the hardware as much as the change"
        )
    return comparable, notes, b_name, a_name


def label_for(path: str) -> str:
    """A short, deterministic label for a trace file: its name without .json/.gz suffixes."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".json", ".pt.trace"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "trace"


def _labels(before: Trace, after: Trace, opts: DiffOptions) -> tuple[str, str]:
    # Labelled by what differs between the two paths: two profiler folders' files share a
    # host name and a timestamp's first digits, their folders tell them apart.
    same = before.meta.path == after.meta.path
    b_auto, a_auto = (label_for(before.meta.path),) * 2 if same else run_labels([before.meta.path, after.meta.path])
    b = opts.label_before or b_auto
    a = opts.label_after or a_auto
    if b == a:
        b, a = f"{b} (before)", f"{a} (after)"
    return b, a


def diff_traces(before: Trace, after: Trace, opts: DiffOptions | None = None) -> DiffResult:
    """Compare two loaded traces; see the module docstring for how they are aligned."""
    opts = opts or DiffOptions()
    config = opts.config
    b_label, a_label = _labels(before, after, opts)
    b = make_side(before, b_label, config, opts.drop_outliers)
    a = make_side(after, a_label, config, opts.drop_outliers)
    comparable, notes, b_dev, a_dev = _device_notes(b, a)
    step_time = compare_steps(b, a, opts)
    per = "step" if b.kept_steps and a.kept_steps else "trace"
    if per == "trace":
        notes.append("no steps on at least one side: GPU figures are per-trace totals, not per step")
        b_per = a_per = 1
    else:
        b_per, a_per = b.per, a.per
    if len(b.kept_steps) != len(a.kept_steps) and per == "step":
        notes.append(f"step counts differ ({len(b.kept_steps)} vs {len(a.kept_steps)}): figures are per step")

    ops = contributions(op_frame(b), op_frame(a), ["op", "input_dims"], b_per, a_per)
    b_kernels, a_kernels = kernel_frame(b), kernel_frame(a)
    kernels = contributions(b_kernels, a_kernels, ["name", "family"], b_per, a_per)
    regions = contributions(region_frame(b), region_frame(a), ["region"], b_per, a_per)
    b_k = b_kernels.filter(pl.col("kind") == "kernel")
    a_k = a_kernels.filter(pl.col("kind") == "kernel")
    kernel_counts = {
        "before_kernels_per_step": b_k.height / b_per,
        "after_kernels_per_step": a_k.height / a_per,
        "before_gpu_ns_per_step": float(b_k["dur_ns"].sum()) / b_per,
        "after_gpu_ns_per_step": float(a_k["dur_ns"].sum()) / a_per,
    }
    if not comparable:
        notes.append("kernel names and times are compared as recorded; treat per-kernel deltas as indicative")
    top = opts.top_n
    added = tuple(kernels.filter(pl.col("status") == "added").sort(["after_ns_per_step", "name"], descending=[True, False])["name"].to_list())
    removed = tuple(
        kernels.filter(pl.col("status") == "removed").sort(["before_ns_per_step", "name"], descending=[True, False])["name"].to_list()
    )
    return DiffResult(
        before_label=b_label,
        after_label=a_label,
        before_path=before.meta.path,
        after_path=after.meta.path,
        verdict=step_time.verdict,
        per=per,
        before_steps=len(b.kept_steps),
        after_steps=len(a.kept_steps),
        before_device=b_dev,
        after_device=a_dev,
        comparable=comparable,
        notes=tuple(notes),
        step_time=step_time,
        kernel_counts=kernel_counts,
        breakdown=breakdown_table(b, a),
        idle_by_cause=idle_by_cause(b, a),
        ops=ops.head(top),
        kernels=kernels.head(top),
        regions=regions.head(top),
        added_kernels=added[:top],
        removed_kernels=removed[:top],
        added_kernel_count=len(added),
        removed_kernel_count=len(removed),
        gpu_delta_ns_per_step=kernel_counts["after_gpu_ns_per_step"] - kernel_counts["before_gpu_ns_per_step"],
        bound=bound_table(b, a),
        memory=memory_table(b, a),
        compile=compile_diff(
            b,
            a,
            step_time,
            regions,
            (kernel_counts["before_kernels_per_step"], kernel_counts["after_kernels_per_step"]),
            (kernel_counts["before_gpu_ns_per_step"], kernel_counts["after_gpu_ns_per_step"]),
        ),
        findings=compare_findings(b.section("findings", FindingsResult)[0], a.section("findings", FindingsResult)[0]),
    )
