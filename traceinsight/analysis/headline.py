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
    "sync": "waiting in synchronizing calls (.item(), .cpu(), torch.cuda.synchronize)",
    "data_loading": "waiting on data loading",
    "launch_overhead": "waiting for the host to launch kernels (launch overhead)",
    "host_compute": "waiting on CPU work inside operators",
    "python": "waiting on Python code",
    "untraced": "with nothing traced on the host",
    "device_wait": "although the next work was already queued (device-side wait)",
}


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


def _idle(sections: Mapping[str, dict[str, Any]]) -> Finding | None:
    """GPU idle share: per step when the steps section measured it, else over the window."""
    steps = sections.get("steps")
    if steps and steps.get("available", True):
        idle = _num(_first(steps, "median_idle_pct", "mean_idle_pct", "idle_pct"))
        if idle is None:
            rows = _rows(steps, "steps", "table", "rows")
            values = sorted(v for r in rows if (v := _num(_first(r, "idle_pct"))) is not None)
            idle = values[len(values) // 2] if values else None
        if idle is not None:
            return Finding("steps", f"GPU idle {idle:.0f} % of each step", idle)
    overview = sections.get("overview")
    if overview and overview.get("available", True):
        devices = [d for d in overview.get("devices") or [] if isinstance(d, dict)]
        busy = [v for d in devices if (v := _num(d.get("busy_pct"))) is not None]
        if busy:
            idle = 100.0 - max(busy)
            where = "GPU" if len(busy) == 1 else "busiest GPU"
            return Finding("overview", f"{where} idle {idle:.0f} % of the traced window", idle)
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
    words = CAUSE_WORDS.get(cause.lower(), f"attributed to {cause}")
    lead = "mostly" if share >= 50 else "largely" if share >= 35 else "in part"
    return Finding("gaps", f"{lead} {words} ({share:.0f} % of idle time)", share / 2)


def _bound(sections: Mapping[str, dict[str, Any]]) -> list[Finding]:
    """Per bound label, the share of regions and how close the compute/memory ones get to roofline."""
    bound = sections.get("bound")
    if not bound or not bound.get("available", True):
        return []
    rows = _rows(bound, "regions", "table", "rows")
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        label = _first(row, "label", "bound", "verdict")
        if isinstance(label, str):
            groups.setdefault(label.lower(), []).append(row)
    findings = []
    for label, members in groups.items():
        weights = [_num(_first(r, "dur_ns", "wall_ns", "span_ns", "gpu_ns")) or 1.0 for r in members]
        pcts = [
            (p, w)
            for r, w in zip(members, weights, strict=True)
            if (p := _num(_first(r, "pct_of_roofline", "roofline_pct", "pct_roofline"))) is not None
        ]
        noun = "region" if len(members) == 1 else "regions"
        if pcts and label in ("compute", "memory", "compute-bound", "memory-bound"):
            avg = sum(p * w for p, w in pcts) / sum(w for _, w in pcts)
            kind = label.removesuffix("-bound")
            findings.append(
                Finding("bound", f"the {kind}-bound {noun} run at {avg:.0f} % of roofline", 10.0 + sum(weights) / 1e9)
            )
        elif label.startswith("overhead"):
            names = ", ".join(str(_first(r, "region", "name") or "?") for r in members[:3])
            findings.append(Finding("bound", f"overhead-bound: {names}", 20.0 + sum(weights) / 1e9))
    return findings


def _compile(sections: Mapping[str, dict[str, Any]]) -> Finding | None:
    comp = sections.get("compile")
    if not comp or not comp.get("available", True):
        return None
    recompiles = _num(_first(comp, "recompiles", "recompile_count", "n_recompiles"))
    if recompiles:
        return Finding("compile", f"{recompiles:.0f} recompilation(s) inside the trace", 15.0)
    return None


_FINDERS: tuple[Callable[[Mapping[str, dict[str, Any]]], Finding | list[Finding] | None], ...] = (
    _idle,
    _cause,
    _bound,
    _compile,
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
    if idle:
        clauses.append(idle[0].text + (", " + cause[0].text if cause else ""))
    elif cause:
        clauses.append("GPU idle time is " + cause[0].text)
    clauses.extend(f.text for f in rest[:2])
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
    return Headline(verdict=compose(findings), findings=tuple(findings))
