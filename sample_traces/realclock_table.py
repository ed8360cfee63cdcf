"""Measured against estimated un-profiled steps, per recording: the table in docs/window.md.

Reads ``sample_traces/realclock/realclock.json`` (each workload's step timed without the
profiler in the same process as its trace, by ``record_realclock.py``), analyses each trace's
window and prints, per recording, the traced step, the measured un-profiled step (the median
over rounds, and the rounds' spread), the estimate with its range and clock, and whether the
range holds the measured step. Also the decode loops of ``sample_traces/decode/`` (timed
without the profiler in ``decode_timings.json``), which the model was not fitted on.

``--fit`` also prints, per recording, the one per-event cost at which the replay gives the
measured step (the calibration behind ``realstep.COST_US``).

    python sample_traces/realclock_table.py [--fit]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from traceinsight.analysis.runner import run_one  # noqa: E402
from traceinsight.analysis.window.realstep import COST_CLASSES, RealStep, steady_steps  # noqa: E402
from traceinsight.analysis.window.spec import WindowResult  # noqa: E402
from traceinsight.api import load  # noqa: E402
from traceinsight.trace.model import Trace  # noqa: E402


@dataclass(frozen=True)
class Row:
    host: str
    workload: str
    options: str
    traced_ns: int
    measured_ns: int
    rounds_lo_ns: int
    rounds_hi_ns: int
    real: RealStep
    cost_fit_us: float | None = None

    @property
    def holds(self) -> bool:
        """The range holds the measured step (its median over rounds)."""
        return self.real.lo_ns <= self.measured_ns <= self.real.hi_ns

    @property
    def overlaps(self) -> bool:
        """The range meets the measured step's own spread over rounds (its run-to-run noise)."""
        return self.real.lo_ns <= self.rounds_hi_ns and self.rounds_lo_ns <= self.real.hi_ns


def window(trace: Trace) -> WindowResult:
    result = run_one(trace, "window")
    assert isinstance(result, WindowResult)
    return result


def fitted_cost_us(trace: Trace, measured_ns: int) -> float | None:
    """The per-event cost (µs, all classes alike) at which the replay gives ``measured_ns``;
    None when even all host time removed leaves the step above it (nothing to fit: the
    step is the GPU's) or the measured step is at least the traced one."""
    from traceinsight.analysis.window.realstep import _replayed, memory_at

    steps = run_one(trace, "steps").steps  # type: ignore[attr-defined]
    numbers = steady_steps(steps)["step"].to_list()
    memory = memory_at(trace)

    def at(us: float) -> int:
        value = _replayed(trace, numbers, {c: us * 1e3 for c in COST_CLASSES}, memory)
        return value if value is not None else 0

    lo, hi = 0.0, 50.0
    if at(lo) <= measured_ns or at(hi) > measured_ns:
        return None
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) > measured_ns else (lo, mid)
    return (lo + hi) / 2


def recordings(fit: bool) -> list[Row]:
    data = json.loads((HERE / "realclock" / "realclock.json").read_text())
    rows = []
    for host, found in data["hosts"].items():
        label = f"{host} (held out)" if found.get("held_out") else host
        for rec in found["recordings"]:
            rounds = rec["unprofiled_rounds_ns"]
            for options, prof in rec["profiled"].items():
                trace = load(HERE / "realclock" / prof["trace"])
                real = window(trace).real_step
                assert real is not None, prof["trace"]
                cost = fitted_cost_us(trace, rec["unprofiled_step_ns"]) if fit else None
                rows.append(Row(label, rec["workload"], options, real.traced_ns, rec["unprofiled_step_ns"], min(rounds),
                                max(rounds), real, cost))
    return rows


def captures() -> list[str]:
    """The traces written by traceinsight's profile() with wait steps: the clock analyze reads."""
    data = json.loads((HERE / "realclock" / "realclock.json").read_text())
    lines = ["| host | workload | traced ms | capture's wait steps ms | plain loop timed before ms | clock |", "|---|---|---|---|---|---|"]
    for host, found in data["hosts"].items():
        for cap in found.get("captures", []):
            real = window(load(HERE / "realclock" / cap["trace"])).real_step
            assert real is not None, cap["trace"]
            lines.append(f"| {host} | {cap['workload']} | {ms(real.traced_ns)} | {ms(real.step_ns)} [{ms(real.lo_ns)}–{ms(real.hi_ns)}] | "
                         f"{ms(cap['unprofiled_step_ns'])} | {real.source} |")
    return lines


def decode_loops() -> list[Row]:
    """The decode loops timed without the profiler (per token) beside their traces."""
    rows = []
    for timing in json.loads((HERE / "decode" / "decode_timings.json").read_text()):
        trace = load(HERE / "decode" / f"{timing['name']}.json.gz")
        real = window(trace).real_step
        if real is None:
            continue
        measured = round(timing["ms_per_token"] * 1e6)
        rows.append(Row("decode (not fitted)", timing["name"], "record_shapes", real.traced_ns, measured, measured, measured, real))
    return rows


def h100_pairs() -> list[Row]:
    """The H100 pairs of models/ and catalogue/, each step timed by CUDA events outside the
    profiler in the run that recorded the trace (model_timings.json, catalogue/timings.json)."""
    found: list[tuple[str, str, float]] = []
    for pair in json.loads((HERE / "models" / "model_timings.json").read_text()):
        for side in ("before", "after"):
            found.append((f"models/model_{pair['pair']}_{side}.json.gz", f"{pair['pair']} {side}", pair[f"{side}_ms"]))
    for entry in json.loads((HERE / "catalogue" / "timings.json").read_text()):
        found.append((f"catalogue/{entry['file']}", f"{entry['pair']} {entry['side']}" + (f" rank {entry['rank']}" if "rank" in entry else ""), entry["ms"]))
    rows = []
    for path, name, step_ms in found:
        trace = load(HERE / path)
        real = window(trace).real_step
        if real is None:
            continue
        measured = round(step_ms * 1e6)
        options = "with_stack, profile_memory" if trace.memory.height else "record_shapes"
        rows.append(Row("H100 (not fitted)", name, options, real.traced_ns, measured, measured, measured, real))
    return rows


def ms(ns: float) -> str:
    return f"{ns / 1e6:.2f}"


def table(rows: list[Row], fit: bool) -> str:
    head = "| host | workload | options | traced ms | measured ms (rounds) | estimated ms [lo–hi] | clock | holds |"
    lines = [head + (" fitted µs/event |" if fit else ""), "|" + "---|" * (8 + fit)]
    for r in rows:
        spread = f" ({ms(r.rounds_lo_ns)}–{ms(r.rounds_hi_ns)})" if r.rounds_lo_ns != r.rounds_hi_ns else ""
        held = "yes" if r.holds else ("within the rounds' spread" if r.overlaps else "**no**")
        line = (f"| {r.host} | {r.workload} | {r.options} | {ms(r.traced_ns)} | {ms(r.measured_ns)}{spread} | "
                f"{ms(r.real.step_ns)} [{ms(r.real.lo_ns)}–{ms(r.real.hi_ns)}] | {r.real.source} | {held} |")
        if fit:
            line += f" {'—' if r.cost_fit_us is None else f'{r.cost_fit_us:.2f}'} |"
        lines.append(line)
    return "\n".join(lines)


def summary(rows: list[Row]) -> dict[str, Any]:
    fitted = [r.cost_fit_us for r in rows if r.cost_fit_us is not None]
    return {
        "recordings": len(rows),
        "held": sum(r.holds for r in rows),
        "within_spread_only": sum(r.overlaps and not r.holds for r in rows),
        "missed": sum(not r.overlaps for r in rows),
        "fitted_us_per_event": [round(min(fitted), 2), round(max(fitted), 2)] if fitted else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--fit", action="store_true", help="also fit the per-event cost of each recording")
    args = ap.parse_args(argv)
    pl.Config.set_tbl_width_chars(200)
    rows = recordings(args.fit)
    print(table(rows, args.fit))
    print()
    print(json.dumps(summary(rows)))
    print()
    print("\n".join(captures()))
    decode = decode_loops() + h100_pairs()
    print()
    print(table(decode, False))
    print()
    print(json.dumps(summary(decode)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
