"""The plain-words verdict at the top of a report, computed from the sections' results.

Each finding comes from one section's ``to_dict()`` (the public, versioned shape), so the
headline keeps working when a section is skipped, unavailable, or gains fields. The verdict
is the most important findings joined into one or two sentences, e.g. "GPU idle 41 % of each
step, mostly waiting on data loading; the compute-bound regions run at 62 % of roofline".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from traceinsight.analysis.base import Result

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


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in data and data[key] is not None:
            return data[key]
    return None


def _rows(data: Mapping[str, Any], *keys: str) -> list[dict[str, Any]]:
    value = _first(data, *keys)
    if isinstance(value, list):
        return [row for row in value if isinstance(row, dict)]
    return []


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _step_idle_pct(row: dict[str, Any]) -> float | None:
    """Idle share of one step on the device: its span minus the GPU work inside it."""
    span = _num(_first(row, "device_dur_ns", "dur_ns"))
    if not span or span <= 0:
        return _num(row.get("idle_pct"))
    busy = sum(_num(row.get(k)) or 0.0 for k in ("kernel_ns", "memcpy_ns", "memset_ns"))
    # Overlapping streams can add up to more than the span: the step is then fully busy.
    return max(0.0, 100.0 * (1.0 - busy / span))


def _pct_words(value: float) -> str:
    return "over 99 %" if 99.0 < value < 100.0 else f"{value:.0f} %"


def _idle_text(where: str, idle: float, scope: str) -> str:
    if idle < NEGLIGIBLE_IDLE_PCT:
        return f"{where} busy {_pct_words(100.0 - idle)} {scope}"
    return f"{where} idle {_pct_words(idle)} {scope}"


def _idle(sections: Mapping[str, dict[str, Any]]) -> Finding | None:
    """GPU idle share: per step when the steps section measured steps, else over the window."""
    steps = sections.get("steps")
    if steps and steps.get("available", True):
        rows = _rows(steps, "steps")
        idle = _median([v for r in rows if not r.get("is_warmup") and (v := _step_idle_pct(r)) is not None])
        if idle is not None:
            return Finding("steps", _idle_text("GPU", idle, "of each step"), idle)
    overview = sections.get("overview")
    if overview and overview.get("available", True):
        devices = [d for d in overview.get("devices") or [] if isinstance(d, dict)]
        busy = [v for d in devices if (v := _num(d.get("busy_pct"))) is not None]
        if busy:
            idle = 100.0 - max(busy)
            where = "GPU" if len(busy) == 1 else "busiest GPU"
            return Finding("overview", _idle_text(where, idle, "of the traced window"), idle)
        return Finding("overview", "no GPU activity in this trace", 0.0)
    return None


def _cause(sections: Mapping[str, dict[str, Any]]) -> Finding | None:
    """The cause that explains most idle time, from the gaps section's per-cause totals."""
    gaps = sections.get("gaps")
    if not gaps or not gaps.get("available", True):
        return None
    totals: dict[str, float] = {}
    by_cause = _first(gaps, "by_cause", "causes", "idle_by_cause", "cause_totals")
    if isinstance(by_cause, dict):
        for cause, value in by_cause.items():
            v = _num(value) if not isinstance(value, dict) else _num(
                _first(value, "idle_ns", "total_ns", "dur_ns", "ns")
            )
            if v is not None:
                totals[str(cause)] = v
    elif isinstance(by_cause, list):
        for row in by_cause:
            if not isinstance(row, dict):
                continue
            cause = _first(row, "cause", "name")
            v = _num(_first(row, "idle_ns", "total_ns", "dur_ns", "ns"))
            if cause is not None and v is not None:
                totals[str(cause)] = totals.get(str(cause), 0.0) + v
    else:
        for row in _rows(gaps, "gaps", "table", "rows"):
            cause = _first(row, "cause")
            v = _num(_first(row, "dur_ns", "idle_ns"))
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


def _bound(sections: Mapping[str, dict[str, Any]]) -> list[Finding]:
    """Per bound label: which regions, and how close the compute/memory ones get to roofline."""
    bound = sections.get("bound")
    if not bound or not bound.get("available", True):
        return []
    rows = _rows(bound, "regions")
    # Regions nest (trace > steps > annotations > ops): judge one level, the most specific
    # one that names work the user chose to mark.
    level = None
    for candidate in ("annotation", "step", "trace"):
        chosen = [r for r in rows if r.get("kind") == candidate]
        if chosen:
            rows, level = chosen, candidate
            break
    # A name marks the same work in every step: give it the label that covers most of its time.
    by_name: dict[str, dict[str, float]] = {}
    for row in rows:
        label = _first(row, "label", "bound")
        if isinstance(label, str) and label not in SKIP_LABELS:
            name = str(_first(row, "name", "region") or "?") if level == "annotation" else f"{level}:{_first(row, 'name')}"
            by_name.setdefault(name, {}).setdefault(label, 0.0)
            by_name[name][label] += _num(_first(row, "dur_ns")) or 1.0
    main_label = {name: max(labels.items(), key=lambda kv: kv[1])[0] for name, labels in by_name.items()}
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        name = str(_first(row, "name", "region") or "?") if level == "annotation" else f"{level}:{_first(row, 'name')}"
        if main_label.get(name) == _first(row, "label", "bound"):
            groups.setdefault(main_label[name], []).append(row)
    total = sum(_num(_first(r, "dur_ns")) or 1.0 for r in rows) or 1.0
    findings = []
    for label, members in groups.items():
        weights = [_num(_first(r, "dur_ns")) or 1.0 for r in members]
        share = sum(weights) / total
        if level == "step":
            who = "every step is" if len(members) == len(rows) else f"{len(members)} of {len(rows)} steps are"
        elif level == "trace":
            who = "the trace as a whole is"
        else:
            names = list(dict.fromkeys(str(_first(r, "name", "region") or "?") for r in members))
            who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            who += " is" if len(names) == 1 else " are"
        text = f"{who} {LABEL_WORDS.get(label, label)}-bound"
        pcts = [
            (p, w)
            for r, w in zip(members, weights, strict=True)
            if (p := _num(_first(r, "pct_of_roofline"))) is not None
        ]
        if pcts and label in ("compute", "memory"):
            avg = sum(p * w for p, w in pcts) / sum(w for _, w in pcts)
            text += f" at {avg:.0f} % of roofline"
        findings.append(Finding("bound", text, 10.0 + 10.0 * share))
    return findings


def _compile(sections: Mapping[str, dict[str, Any]]) -> list[Finding]:
    comp = sections.get("compile")
    if not comp or not comp.get("available", True):
        return []
    found = []
    recompiles = _num(_first(comp, "recompiles_in_trace", "recompiles"))
    if recompiles:
        found.append(Finding("compile", f"{recompiles:.0f} torch.compile recompilation(s) inside the trace", 15.0))
    notes = [n for n in comp.get("findings") or [] if isinstance(n, str)]
    if notes:
        found.append(Finding("compile", notes[0], 8.0))
    return found


def _memory(sections: Mapping[str, dict[str, Any]]) -> list[Finding]:
    mem = sections.get("memory")
    if not mem or not mem.get("available", True):
        return []
    found = []
    if _rows(mem, "leaks"):
        found.append(Finding("memory", "allocated memory grows from step to step (possible leak)", 12.0))
    gpu_peaks = [
        v
        for r in _rows(mem, "peaks")
        if r.get("device_type") != 0 and (v := _num(r.get("peak_allocated_bytes"))) is not None
    ]
    if gpu_peaks:
        found.append(Finding("memory", f"peak GPU memory allocated {max(gpu_peaks) / 2**30:.2f} GiB", 1.0))
    return found


def _kernels(sections: Mapping[str, dict[str, Any]]) -> Finding | None:
    kernels = sections.get("kernels")
    if not kernels or not kernels.get("available", True):
        return None
    launch_data = kernels.get("launch")
    launch: dict[str, Any] = launch_data if isinstance(launch_data, dict) else {}
    short = _num(launch.get("shorter_than_launch_pct"))
    count = _num(launch.get("kernels")) or 0
    # Only worth a headline when it is most kernels of a sizeable trace.
    if short is None or short < 50 or count < 100:
        return None
    return Finding("kernels", f"{short:.0f} % of kernels run for less time than the CPU takes to launch them", 9.0)


_FINDERS: tuple[Callable[[Mapping[str, dict[str, Any]]], Finding | list[Finding] | None], ...] = (
    _idle,
    _cause,
    _bound,
    _compile,
    _memory,
    _kernels,
)


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


def headline(sections: Mapping[str, Result]) -> Headline:
    """The verdict for a set of section results (any subset of the registry)."""
    data = {name: result.to_dict() for name, result in sections.items()}
    findings: list[Finding] = []
    for finder in _FINDERS:
        found = finder(data)
        if isinstance(found, Finding):
            findings.append(found)
        elif found:
            findings.extend(found)
    # Same order as the verdict reads: idle share, its cause, then the rest by importance.
    rank = {"steps": 0, "overview": 0, "gaps": 1}
    ordered = sorted(findings, key=lambda f: (rank.get(f.section, 2), -f.weight))
    return Headline(verdict=compose(ordered), findings=tuple(ordered))
