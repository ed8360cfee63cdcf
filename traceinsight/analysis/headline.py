"""The plain-words verdict at the top of a report, computed from the sections' results.

Each finding reads one section's result object (its typed fields), so a renamed field fails
type checking here; a skipped or unavailable section simply adds no finding. The verdict
is the most important findings joined into one or two sentences, e.g. "GPU idle 41 % of each
step, mostly waiting on data loading; the compute-bound regions run at 62 % of roofline".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from traceinsight.analysis.base import R, Result
from traceinsight.analysis.bound import BoundResult
from traceinsight.analysis.compile import CompileResult
from traceinsight.analysis.gaps import GapsResult
from traceinsight.analysis.kernels import KernelsResult
from traceinsight.analysis.memory import MemoryResult
from traceinsight.analysis.overview import OverviewResult
from traceinsight.analysis.steps import StepsResult

# Causes as the gaps section names them, in the words people use.
CAUSE_WORDS = {
    "sync": "waiting in synchronizing calls",
    "data_loading": "waiting on data loading",
    "launch_overhead": "waiting for the host to launch kernels",
    "host_compute": "waiting on CPU work inside operators",
    "python": "waiting on Python code",
    "untraced": "with nothing traced on the host",
    "device_wait": "on device-side waits (the next work was already queued)",
}
# Bound labels that say nothing on their own, and the words for the others.
SKIP_LABELS = frozenset({"", "unknown", "unclassified", "idle"})
LABEL_WORDS = {"data": "data-loading"}
# Below this idle share the cause of the idle time is not worth a headline.
NEGLIGIBLE_IDLE_PCT = 5.0


@dataclass(frozen=True)
class Finding:
    """One sentence fragment of the verdict, with where it came from and how much it matters."""

    section: str
    text: str
    weight: float  # larger = more important; used to order the findings


@dataclass(frozen=True)
class Headline:
    verdict: str
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "findings": [
                {"section": f.section, "text": f.text, "weight": round(f.weight, 3)}
                for f in self.findings
            ],
        }


def _finite(value: float | int | None) -> float | None:
    """The value as a float, or None where JSON would carry null (missing, NaN, inf)."""
    if value is None or isinstance(value, bool):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _step_idle_pct(row: dict[str, Any]) -> float | None:
    """Idle share of one step on the device: its span minus the GPU work inside it."""
    span = _finite(row["device_dur_ns"])
    if not span or span <= 0:
        return None
    busy = sum(_finite(row[k]) or 0.0 for k in ("kernel_ns", "memcpy_ns", "memset_ns"))
    # Overlapping streams can add up to more than the span: the step is then fully busy.
    return max(0.0, 100.0 * (1.0 - busy / span))


def _pct_words(value: float) -> str:
    return "over 99 %" if 99.0 < value < 100.0 else f"{value:.0f} %"


def _idle_text(where: str, idle: float, scope: str) -> str:
    if idle < NEGLIGIBLE_IDLE_PCT:
        return f"{where} busy {_pct_words(100.0 - idle)} {scope}"
    return f"{where} idle {_pct_words(idle)} {scope}"


def _idle(steps: StepsResult | None, overview: OverviewResult | None) -> Finding | None:
    """GPU idle share: per step when the steps section measured steps, else over the window."""
    if steps is not None and steps.available:
        rows = steps.steps.to_dicts()
        idle = _median([v for r in rows if not r["is_warmup"] and (v := _step_idle_pct(r)) is not None])
        if idle is not None:
            return Finding("steps", _idle_text("GPU", idle, "of each step"), idle)
    if overview is not None and overview.available:
        busy = [v for d in overview.devices if (v := _finite(d.busy_pct)) is not None]
        if busy:
            idle = 100.0 - max(busy)
            where = "GPU" if len(busy) == 1 else "busiest GPU"
            return Finding("overview", _idle_text(where, idle, "of the traced window"), idle)
        return Finding("overview", "no GPU activity in this trace", 0.0)
    return None


def _cause(gaps: GapsResult | None) -> Finding | None:
    """The cause that explains most idle time, from the gaps section's per-cause totals."""
    if gaps is None or not gaps.available:
        return None
    totals: dict[str, float] = {}
    for row in gaps.by_cause.iter_rows(named=True):
        cause, v = row["cause"], _finite(row["idle_ns"])
        if cause is not None and v is not None:
            totals[str(cause)] = totals.get(str(cause), 0.0) + v
    total = sum(totals.values())
    if total <= 0:
        return None
    cause, value = max(totals.items(), key=lambda kv: kv[1])
    share = 100.0 * value / total
    words = CAUSE_WORDS.get(cause.lower(), "attributed to")
    lead = "mostly" if share >= 50 else "largely" if share >= 35 else "in part"
    return Finding("gaps", f"{lead} {words} ({cause}: {share:.0f} % of idle time)", share / 2)


def _bound(bound: BoundResult | None) -> list[Finding]:
    """Per bound label: which regions, and how close the compute/memory ones get to roofline."""
    if bound is None or not bound.available:
        return []
    rows = bound.regions.to_dicts()
    # Regions nest (trace > steps > annotations > ops): judge one level, the most specific
    # one that names work the user chose to mark.
    level = None
    for candidate in ("annotation", "step", "trace"):
        chosen = [r for r in rows if r["kind"] == candidate]
        if chosen:
            rows, level = chosen, candidate
            break

    def key(row: dict[str, Any]) -> str:
        return str(row["name"] or "?") if level == "annotation" else f"{level}:{row['name']}"

    def weight(row: dict[str, Any]) -> float:
        return _finite(row["dur_ns"]) or 1.0

    # A name marks the same work in every step: give it the label that covers most of its time.
    by_name: dict[str, dict[str, float]] = {}
    for row in rows:
        label = row["label"]
        if isinstance(label, str) and label not in SKIP_LABELS:
            by_name.setdefault(key(row), {}).setdefault(label, 0.0)
            by_name[key(row)][label] += weight(row)
    main_label = {name: max(labels.items(), key=lambda kv: kv[1])[0] for name, labels in by_name.items()}
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        name = key(row)
        if main_label.get(name) == row["label"]:
            groups.setdefault(main_label[name], []).append(row)
    total = sum(weight(r) for r in rows) or 1.0
    findings = []
    for label, members in groups.items():
        weights = [weight(r) for r in members]
        share = sum(weights) / total
        if level == "step":
            who = "every step is" if len(members) == len(rows) else f"{len(members)} of {len(rows)} steps are"
        elif level == "trace":
            who = "the trace as a whole is"
        else:
            names = list(dict.fromkeys(str(r["name"] or "?") for r in members))
            who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            who += " is" if len(names) == 1 else " are"
        text = f"{who} {LABEL_WORDS.get(label, label)}-bound"
        pcts = [
            (p, w)
            for r, w in zip(members, weights, strict=True)
            if (p := _finite(r["pct_of_roofline"])) is not None
        ]
        if pcts and label in ("compute", "memory"):
            avg = sum(p * w for p, w in pcts) / sum(w for _, w in pcts)
            text += f" at {avg:.0f} % of roofline"
        findings.append(Finding("bound", text, 10.0 + 10.0 * share))
    return findings


def _compile(comp: CompileResult | None) -> list[Finding]:
    if comp is None or not comp.available:
        return []
    found = []
    if comp.recompiles_in_trace:
        found.append(Finding("compile", f"{comp.recompiles_in_trace:.0f} torch.compile recompilation(s) inside the trace", 15.0))
    if comp.findings:
        found.append(Finding("compile", comp.findings[0], 8.0))
    return found


def _memory(mem: MemoryResult | None) -> list[Finding]:
    if mem is None or not mem.available:
        return []
    found = []
    if mem.leaks:
        found.append(Finding("memory", "allocated memory grows from step to step (possible leak)", 12.0))
    gpu_peaks = [
        v
        for r in mem.peaks.iter_rows(named=True)
        if r["device_type"] != 0 and (v := _finite(r["peak_allocated_bytes"])) is not None
    ]
    if gpu_peaks:
        found.append(Finding("memory", f"peak GPU memory allocated {max(gpu_peaks) / 2**30:.2f} GiB", 1.0))
    return found


def _kernels(kernels: KernelsResult | None) -> Finding | None:
    if kernels is None or not kernels.available:
        return None
    short = _finite(kernels.launch.shorter_than_launch_pct)
    count = kernels.launch.kernels
    # Only worth a headline when it is most kernels of a sizeable trace.
    if short is None or short < 50 or count < 100:
        return None
    return Finding("kernels", f"{short:.0f} % of kernels run for less time than the CPU takes to launch them", 9.0)


def compose(findings: Iterable[Finding]) -> str:
    """Join findings into the verdict: the idle share and its cause read as one clause."""
    items = list(findings)
    if not items:
        return "Nothing to say: no section produced a finding for this trace."
    idle = [f for f in items if f.section in ("steps", "overview")]
    cause = [f for f in items if f.section == "gaps"]
    rest = sorted((f for f in items if f not in idle and f not in cause), key=lambda f: -f.weight)
    clauses = []
    if idle and idle[0].weight < NEGLIGIBLE_IDLE_PCT:
        clauses.append(idle[0].text)
    elif idle:
        clauses.append(idle[0].text + (", " + cause[0].text if cause else ""))
    elif cause:
        clauses.append("GPU idle time is " + cause[0].text)
    clauses.extend(f.text for f in rest[:3])
    sentence = "; ".join(clauses)
    return sentence[0].upper() + sentence[1:] + "."


def _section(sections: Mapping[str, Result], name: str, cls: type[R]) -> R | None:
    result = sections.get(name)
    return result if isinstance(result, cls) else None


def headline(sections: Mapping[str, Result]) -> Headline:
    """The verdict for a set of section results (any subset of the registry)."""
    found: list[Finding | None] = [
        _idle(_section(sections, "steps", StepsResult), _section(sections, "overview", OverviewResult)),
        _cause(_section(sections, "gaps", GapsResult)),
        *_bound(_section(sections, "bound", BoundResult)),
        *_compile(_section(sections, "compile", CompileResult)),
        *_memory(_section(sections, "memory", MemoryResult)),
        _kernels(_section(sections, "kernels", KernelsResult)),
    ]
    findings = [f for f in found if f is not None]
    # Same order as the verdict reads: idle share, its cause, then the rest by importance.
    rank = {"steps": 0, "overview": 0, "gaps": 1}
    ordered = sorted(findings, key=lambda f: (rank.get(f.section, 2), -f.weight))
    return Headline(verdict=compose(ordered), findings=tuple(ordered))
