"""The plain-words verdict at the top of a report, built on the breakdown and the findings.

It says, in this order: whether the window is steady state, when it is not (what it holds
instead and what to record); what the GPU's time is spent on (compute, exposed communication,
copies, idle and the main cause of the idle time) with the breakdown section's own figures;
then the findings with the largest savings and their fixes. A bound region is named only
when its kernels hold a large share of the GPU time, and never when it is an annotation of
torch.compile or the profiler. A trace without GPU work gets a verdict about the host.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import R, Result
from traceinsight.analysis.findings.catalogue import ACTION, LEAD_SAVING_PCT, MEMORY_FINDINGS
from traceinsight.analysis.findings.model import Finding as FindingModel
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.findings.read.context import DYNAMO_INTERNAL
from traceinsight.analysis.findings.verdict.rank import HOST_TIME_FINDINGS
from traceinsight.analysis.lib.words import count
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult, group_of
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.analysis.window.overhead import overhead_lowers_host_findings, overhead_summary
from traceinsight.analysis.window.spec import WindowResult

# Causes as the gaps section names them, in the words people use.
CAUSE_WORDS = {
    "sync": "waiting in synchronizing calls",
    "data_loading": "waiting on data loading",
    "allocator": "waiting for the host in cudaMalloc/cudaFree",
    "launch_overhead": "waiting for the host to launch kernels",
    "host_compute": "waiting on CPU work inside operators",
    "python": "waiting on Python code",
    "untraced": "with nothing traced on the host",
    "device_wait": "on device-side waits, the next work already queued",
}
# The groups of the breakdown, in the words of the verdict.
GROUP_WORDS = {
    "compute": "compute",
    "communication": "exposed communication",
    "memcpy": "copies",
    "memset": "memset",
}
LABEL_WORDS = {"data": "data-loading"}
SKIP_LABELS = frozenset({"", "unknown", "unclassified", "idle"})
# Below this idle share the cause of the idle time is not worth a clause.
NEGLIGIBLE_IDLE_PCT = 5.0
# Busy groups smaller than this share of the window are left out of the time clause.
MINOR_GROUP_PCT = 0.5
# Findings that lead the verdict: at most this many, each saving at least this share.
TOP_FINDINGS = 3
# Host ops are named in a verdict without GPU work only when their self time is at least this
# share of the window.
HOST_OPS_MIN_PCT = 5.0
# A region's bound is named only when its kernels fill at least this share of the window.
REGION_SHARE_PCT = 25.0
# Annotations of the profiler and of torch.compile: never named as regions.
INTERNAL = re.compile(
    r"(?i)^ProfilerStep#\d+$|compile_id=|entire_frame_compile|^##|" + DYNAMO_INTERNAL.pattern.removeprefix("(?i)")
)


def is_internal(name: str) -> bool:
    """True for annotations made by the profiler or torch.compile, not by the user."""
    return bool(INTERNAL.search(name)) or name.startswith("(")


@dataclass(frozen=True)
class Finding:
    """One clause of the verdict, with the section it came from and how much it matters."""

    section: str
    text: str
    weight: float  # larger = more important; used to order clauses of the same kind


@dataclass(frozen=True)
class Headline:
    verdict: str
    findings: tuple[Finding, ...] = ()
    # The time split the verdict quotes: (group, % of the window) as the breakdown has them.
    shares: tuple[tuple[str, float], ...] = ()
    device: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "findings": [
                {"section": f.section, "text": f.text, "weight": round(f.weight, 3)}
                for f in self.findings
            ],
            "device": self.device,
            "shares_pct": {group: round(value, 3) for group, value in self.shares},
        }


def _finite(value: float | int | None) -> float | None:
    """The value as a float, or None where JSON would carry null (missing, NaN, inf)."""
    if value is None or isinstance(value, bool):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _pct(value: float) -> str:
    # The breakdown section prints shares with one decimal: the verdict uses the same figure.
    return f"{value:.1f} %"


def _ms(value_ns: float) -> str:
    if value_ns >= 1e9:
        return f"{value_ns / 1e9:.2f} s"
    if value_ns >= 1e6:
        return f"{value_ns / 1e6:.1f} ms"
    return f"{value_ns / 1e3:.0f} µs"


def _section(sections: Mapping[str, Result], name: str, cls: type[R]) -> R | None:
    result = sections.get(name)
    return result if isinstance(result, cls) and result.available else None


# -- what the time is spent on ----------------------------------------------------------


def _main_cause(gaps: GapsResult | None) -> str | None:
    """The cause that explains most idle time, from the gaps section's per-cause totals."""
    if gaps is None:
        return None
    totals = gaps.by_cause.group_by("cause").agg(pl.col("idle_ns").sum()).drop_nulls()
    total = float(totals["idle_ns"].sum()) if totals.height else 0.0
    if total <= 0:
        return None
    top = totals.sort(["idle_ns", "cause"], descending=[True, False]).row(0, named=True)
    share = 100.0 * float(top["idle_ns"]) / total
    lead = "mostly" if share >= 50 else "largely" if share >= 35 else "in part"
    return f"{lead} {CAUSE_WORDS.get(str(top['cause']).lower(), 'cause: ' + str(top['cause']))}"


def time_shares(breakdown: BreakdownResult) -> tuple[int, list[tuple[str, float]]]:
    """The busiest device and its window split by group (% of the window), breakdown order."""
    busiest = breakdown.devices.sort(["busy_ns", "device"], descending=[True, False])
    device = int(busiest["device"][0])
    rows = breakdown.by_device.filter(pl.col("device") == device)
    shares: dict[str, float] = {}
    for row in rows.iter_rows(named=True):
        group = group_of(str(row["category"]))
        shares[group] = shares.get(group, 0.0) + 100.0 * float(row["share"])
    return device, list(shares.items())


def _time_clause(
    breakdown: BreakdownResult, gaps: GapsResult | None, findings: FindingsResult | None
) -> tuple[Finding, int, list[tuple[str, float]]]:
    device, shares = time_shares(breakdown)
    parts = []
    for group, value in shares:
        if group == "idle":
            if value >= NEGLIGIBLE_IDLE_PCT and (cause := _main_cause(gaps)):
                parts.append(f"idle {_pct(value)} ({cause})")
            else:
                parts.append(f"idle {_pct(value)}")
        elif value >= MINOR_GROUP_PCT:
            parts.append(f"{GROUP_WORDS.get(group, group)} {_pct(value)}")
    gpu = "GPU" if breakdown.devices.height == 1 else f"GPU {device}"
    scope = f"{gpu} time over the traced {_ms(breakdown.window_ns)}"
    if findings is not None and findings.step_ns and findings.steps:
        traced = findings.traced_step_ns or findings.step_ns
        scope += f" ({count(findings.steps, 'step')}, {_ms(traced)} each"
        if findings.clock != "traced" and findings.step_ns < traced:
            scope += f"; {_ms(findings.step_ns)} without the profiler, {findings.clock}"
        scope += ")"
    idle = dict(shares).get("idle", 0.0)
    return Finding("breakdown", f"{scope}: " + ", ".join(parts), idle), device, shares


def _host_clause(overview: OverviewResult | None, ops: OpsResult | None, *, launched: bool = False) -> Finding | None:
    """No GPU work at all: say so, and where the host's time goes. ``launched``: the host did
    launch GPU work that the trace does not hold (the window's ``gpu_not_recorded`` says so)."""
    window = f"{_ms(overview.window_ns)}" if overview is not None and overview.window_ns > 0 else ""
    named: list[str] = []
    if ops is not None and ops.ops.height:
        top = (
            ops.ops.filter(~pl.col("name").str.contains(INTERNAL.pattern))
            .group_by("name")
            .agg(pl.col("host_self_ns").sum())
            .sort(["host_self_ns", "name"], descending=[True, False])
            .head(3)
        )
        # Ops whose self time is a sliver of the window say nothing about where it went (the
        # time is then in spans that are no ops: collectives, annotations, Python).
        floor = HOST_OPS_MIN_PCT / 100.0 * (overview.window_ns if overview is not None else 0)
        named = [
            f"{r['name']} {_ms(r['host_self_ns'])}" for r in top.iter_rows(named=True) if r["host_self_ns"] > max(floor, 0)
        ]
    if launched:
        if not named:
            return None
        return Finding("overview", f"host time (self){' over the traced ' + window if window else ''} mostly in " + ", ".join(named), 0.0)
    text = "no GPU work in this trace: only the host was recorded" + (f" ({window})" if window else "")
    if named:
        text += "; host time (self) mostly in " + ", ".join(named)
    return Finding("overview", text, 0.0)


def _steps_idle_clause(steps: StepsResult | None, overview: OverviewResult | None) -> Finding | None:
    """Without the breakdown section: the idle share from the steps or the overview."""
    if steps is not None and steps.steps.height:
        rows = steps.steps.filter(~pl.col("is_warmup"))
        rows = rows if rows.height else steps.steps
        span = float(rows["device_dur_ns"].sum())
        busy = float(sum(rows[c].sum() for c in ("kernel_ns", "memcpy_ns", "memset_ns")))
        if span > 0:
            idle = max(0.0, 100.0 * (1.0 - busy / span))
            return Finding("steps", f"GPU idle {_pct(idle)} of the steps' device time", idle)
    if overview is not None:
        busy_pcts = [v for d in overview.devices if (v := _finite(d.busy_pct)) is not None]
        if busy_pcts:
            idle = 100.0 - max(busy_pcts)
            return Finding("overview", f"GPU idle {_pct(idle)} of the traced window", idle)
    return None


# -- what to fix ------------------------------------------------------------------------


def _window_clause(window: WindowResult | None) -> Finding | None:
    """The window is not steady state: what it holds instead, and what to record."""
    if window is None or not window.limiting:
        return None
    first, *others = window.limiting
    # host and device clocks that disagree, or GPU activity missing, are not a state of the
    # run but of its trace
    clocks = first.id == "late_device_start"
    unrecorded = first.id == "gpu_not_recorded"
    lead = (
        "this trace's host and device times disagree"
        if clocks
        else "the GPU's activity was not recorded"
        if unrecorded
        else "this window is not steady state"
    )
    evidence = first.evidence.removesuffix(": the GPU's activity was not recorded") if unrecorded else first.evidence
    evidence = evidence.replace(": the GPU's activity was not recorded;", ";")
    text = f"{lead}: {evidence}"
    if others:
        text += "; also " + ", ".join(f.title for f in others)
    advice = [a for a in dict.fromkeys(f.advice for f in window.limiting) if a]
    if advice:
        how = ". To read it, " if clocks else ". To see the GPU's work, " if unrecorded else ". To diagnose the steady state, "
        text += (how if not others else ". To diagnose the steady state, ") + "; ".join(advice)
    return Finding("window", text, 100.0)


def _overhead_clause(window: WindowResult | None, findings: FindingsResult | None) -> Finding | None:
    """Host-time findings lead on a trace whose host time the profiler inflated."""
    flag = None if window is None else window.flag("profiler_overhead")
    if flag is None or findings is None:
        return None
    leads = [f for f in lead_findings(findings) if f.id in HOST_TIME_FINDINGS]
    if not leads:
        return None
    if not overhead_lowers_host_findings(flag):
        return None
    if findings.clock == "recorded":
        return None
    if findings.clock == "estimated":
        return Finding(
            "window",
            f"host time is inflated by the profiler ({overhead_summary(flag)}): savings are priced on the step "
            f"without it, estimated at {_ms(findings.step_ns or 0)}; " + (flag.advice or ""),
            0.5,
        )
    return Finding(
        "window",
        f"host time is inflated by the profiler ({overhead_summary(flag)}), so the {leads[0].id} saving may "
        "read high; " + (flag.advice or ""),
        0.5,
    )


def lead_findings(findings: FindingsResult) -> list[FindingModel]:
    """The findings the verdict names: the panel's first ones, in the panel's order (largest
    saving first, a cause in the code before the launch-bound residual priced after it), each
    saving at least ``LEAD_SAVING_PCT``. No finding is passed over: the first fix the verdict
    names is the first of the findings panel."""
    leading = []
    for f in findings.findings:
        if f.saving_pct < LEAD_SAVING_PCT:
            break  # only causes of at least this size move up: none after this one leads either
        leading.append(f)
    return leading[:TOP_FINDINGS]


def _first_clause(reason: str) -> str:
    """The first clause of a confidence reason, short enough for a verdict."""
    head = reason.split(";", 1)[0].strip().rstrip(".")
    return head if len(head) <= 120 else head[:117].rsplit(" ", 1)[0] + " …"


def _finding_clauses(findings: FindingsResult | None, full_window_ns: int = 0) -> list[Finding]:
    if findings is None:
        return []
    chosen = lead_findings(findings)
    clauses = []
    # Savings of a window with one-time spans left out are of the rest: say so.
    rest = 0 < findings.window_ns < full_window_ns
    for i, f in enumerate(chosen):
        unit = "per step" if f.per_step and findings.step_ns else "in the window"
        saving = f"~{f.saving_pct:.0f} % ({_ms(f.saving_ns)} {unit})"
        action = f.action or ACTION.get(f.id, f.fix)
        lead = "Fix first" if i == 0 else "then"
        if i == 0 and rest:
            lead = f"Over the remaining {_ms(findings.window_ns)}, fix first"
        # A low-confidence finding keeps its rank (the panel's order) and says what it rests on;
        # after the first, only that it is low (the findings panel gives the reason), so that a
        # verdict of three fixes still fits the first screen.
        doubt = (
            (f" (low confidence: {_first_clause(f.confidence_reason)})" if i == 0 else " (low confidence)")
            if f.confidence == "low" else ""
        )
        clauses.append(
            Finding("findings", f"{lead}: {_lower(f.title)} [{f.id}], saving {saving}{doubt}: {action}", f.saving_pct)
        )
    if not chosen:
        # Memory findings save no time: the largest time finding stands for "largest".
        timed = [f for f in findings.findings if f.id not in MEMORY_FINDINGS]
        if timed:
            top = timed[0]
            text = f"No finding saves more than {LEAD_SAVING_PCT:.0f} % (largest: {top.title} [{top.id}], ~{top.saving_pct:.1f} %)"
        else:
            text = "No material finding (none would save 1 % or more)"
        if rest:
            text += f" over the remaining {_ms(findings.window_ns)}"
        clauses.append(Finding("findings", text, 0.0))
    return clauses


def _roofline_mean() -> pl.Expr:
    """Time-weighted % of roofline over the rows that have one (null where none does: a
    label guessed from kernel families has no roofline position to quote)."""
    known = pl.col("pct_of_roofline").is_not_null()
    ns = pl.col("kernel_ns").filter(known).sum()
    return pl.when(ns > 0).then((pl.col("pct_of_roofline") * pl.col("kernel_ns")).filter(known).sum() / ns)


def _bound_clause(bound: BoundResult | None, window_ns: int, *, steps_too: bool = True) -> Finding | None:
    """The bound of the user region whose kernels hold most GPU time, when that share is large.

    Whole steps are judged only when no finding leads (``steps_too``): a step's label then
    says what kind of work the time is, where a finding would say what to change."""
    if bound is None or bound.regions.height == 0:
        return None
    regions = bound.regions
    total = float(window_ns)
    if total <= 0:
        return None
    for level in ("annotation", "step") if steps_too else ("annotation",):
        rows = regions.filter((pl.col("kind") == level) & pl.col("label").is_not_null() & ~pl.col("label").is_in(list(SKIP_LABELS)))
        if level == "annotation":
            rows = rows.filter(~pl.col("name").str.contains(INTERNAL.pattern))
        if rows.height == 0:
            continue
        per_name = (
            rows.group_by("name", "label")
            .agg(
                pl.col("kernel_ns").sum(),
                _roofline_mean().alias("roofline"),
                pl.len().alias("count"),
            )
            .sort(["kernel_ns", "name"], descending=[True, False])
        )
        if level == "step":
            per_name = (
                rows.group_by("label")
                .agg(
                    pl.col("kernel_ns").sum(),
                    _roofline_mean().alias("roofline"),
                    pl.len().alias("count"),
                )
                .with_columns(name=pl.lit("steps"))
                .sort(["kernel_ns", "label"], descending=[True, False])
            )
        top = per_name.row(0, named=True)
        share = 100.0 * float(top["kernel_ns"]) / total
        if share < REGION_SHARE_PCT:
            continue
        label = str(top["label"])
        if level == "step":
            who = "every step is" if top["count"] == rows.height else f"{top['count']} of {rows.height} steps are"
        else:
            who = f"region {top['name']} (its kernels {share:.0f} % of the window) is"
        text = f"{who} {LABEL_WORDS.get(label, label)}-bound"
        roofline = _finite(top["roofline"])
        if roofline is not None and label in ("compute", "memory"):
            text += f" at {roofline:.0f} % of roofline"
        return Finding("bound", text, share)
    return None


def _leak_clause(memory: MemoryResult | None, findings: FindingsResult | None = None) -> Finding | None:
    if memory is None or not memory.leaks:
        return None
    growth = next((f for f in (findings.findings if findings else ()) if f.id == "memory_growth"), None)
    if growth is None:
        return Finding("memory", "allocated memory grows from step to step (possible leak)", 1.0)
    per_step = dict(growth.evidence.figures).get("growth_per_step_bytes", 0.0)
    where = f" (allocated at {', '.join(growth.evidence.locations[:2])})" if growth.evidence.locations else ""
    return Finding(
        "memory",
        f"allocated memory grows {per_step / 2**20:.1f} MiB per step{where} [memory_growth]: "
        + (growth.action or ACTION.get("memory_growth", growth.fix)),
        1.0,
    )


def _lower(title: str) -> str:
    """A title inside a sentence: "The GPU waits" -> "the GPU waits"; "float32 ..." unchanged."""
    return title[0].lower() + title[1:] if len(title) > 1 and title[0].isupper() and title[1].islower() else title


def compose(findings: Iterable[Finding]) -> str:
    """Join clauses into the verdict: the window's limits (when it is not steady state), the
    time split, then the fixes, then the rest.

    The time split is one sentence, the findings another (joined by "; "), each other
    clause its own sentence.
    """
    items = list(findings)
    if not items:
        return "Nothing to say: no section produced a finding for this trace."
    window = [f.text for f in items if f.section == "window" and f.weight >= 100.0]
    time = [f.text for f in items if f.section in ("breakdown", "overview", "steps")][:1]
    fixes = [f.text for f in items if f.section == "findings"]
    rest = [
        f.text
        for f in sorted(items, key=lambda f: -f.weight)
        if f.section not in ("breakdown", "overview", "steps", "findings") and f.text not in window
    ]
    sentences = [*window, *time, *(["; ".join(fixes)] if fixes else []), *rest]
    return " ".join(_sentence(s) for s in sentences)


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def headline(sections: Mapping[str, Result]) -> Headline:
    """The verdict for a set of section results (any subset of the registry)."""
    breakdown = _section(sections, "breakdown", BreakdownResult)
    findings = _section(sections, "findings", FindingsResult)
    gaps = _section(sections, "gaps", GapsResult)
    overview = _section(sections, "overview", OverviewResult)
    window = _section(sections, "window", WindowResult)
    clauses: list[Finding | None] = [_window_clause(window)]
    device: int | None = None
    shares: list[tuple[str, float]] = []
    no_gpu = overview is not None and not any(d.busy_ns > 0 for d in overview.devices)
    raw_breakdown = sections.get("breakdown")
    if breakdown is not None:
        time, device, shares = _time_clause(breakdown, gaps, findings)
        clauses.append(time)
    elif no_gpu or (isinstance(raw_breakdown, BreakdownResult) and (raw_breakdown.reason or "").startswith("no GPU")):
        launched = window is not None and window.flag("gpu_not_recorded") is not None
        clauses.append(_host_clause(overview, _section(sections, "ops", OpsResult), launched=launched))
        # The findings panel is shown beside this verdict: what it ranks first (host-side
        # findings such as gloo collectives) is what the verdict names.
    else:
        clauses.append(_steps_idle_clause(_section(sections, "steps", StepsResult), overview))
    if findings is not None or "findings" in sections:
        full = window.window_ns if window is not None else breakdown.window_ns if breakdown is not None else 0
        clauses.extend(_finding_clauses(findings, full))
        clauses.append(_overhead_clause(window, findings))
    leads = any(c is not None and c.section == "findings" and c.weight > 0 for c in clauses)
    # Whole steps are labelled only when compute fills most of the window (not copies, idle).
    computing = dict(shares).get("compute", 0.0) >= 50.0
    if breakdown is not None:
        clauses.append(
            _bound_clause(_section(sections, "bound", BoundResult), breakdown.window_ns, steps_too=computing and not leads)
        )
    clauses.append(_leak_clause(_section(sections, "memory", MemoryResult), findings))
    kept = tuple(c for c in clauses if c is not None)
    return Headline(verdict=compose(kept), findings=kept, shares=tuple(shares), device=device)
