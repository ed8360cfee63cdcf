"""The un-profiled step estimated from a trace holds the step measured without the profiler.

Over sample_traces/realclock/: 12 workloads on two H200 hosts, each step timed without the
profiler (CUDA events, median over rounds) in the same process that recorded the trace
(sample_traces/record_realclock.py). The table in docs/window.md is these rows
(sample_traces/realclock_table.py).
"""

from __future__ import annotations

import functools
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from traceinsight.analysis.runner import run_one
from traceinsight.analysis.window.realstep import RealStep
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.trace.loader import load

ROOT = Path(__file__).resolve().parents[2] / "sample_traces" / "realclock"
DATA = json.loads((ROOT / "realclock.json").read_text())
CASES = [
    pytest.param(host, rec, options, id=f"{host}-{rec['workload']}-{options}")
    for host, found in DATA["hosts"].items()
    for rec in found["recordings"]
    for options in rec["profiled"]
]


@functools.cache
def window(trace: str) -> WindowResult:
    result = run_one(load(ROOT / trace), "window")
    assert isinstance(result, WindowResult)
    return result


def estimate(rec: dict[str, Any], options: str) -> RealStep:
    real = window(rec["profiled"][options]["trace"]).real_step
    assert real is not None
    return real


@pytest.mark.parametrize(("host", "rec", "options"), CASES)
def test_the_range_meets_the_measured_step(host: str, rec: dict[str, Any], options: str) -> None:
    real = estimate(rec, options)
    assert real.source == "model"
    rounds = rec["unprofiled_rounds_ns"]
    # the measured step moved between rounds (the host's own noise): the range must at least
    # meet that spread; the median held is counted below
    assert real.lo_ns <= max(rounds) and min(rounds) <= real.hi_ns, (real, rounds)
    # the traced step is the profiled one, timed by CUDA events in the same run (±3 %)
    assert real.traced_ns == pytest.approx(rec["profiled"][options]["median_device_ns"], rel=0.03)
    # the flag's public figures are the range: cost = traced − un-profiled (never below 0)
    flag = window(rec["profiled"][options]["trace"]).flag("profiler_overhead")
    if flag is not None:
        figures = dict(flag.figures)
        assert figures["cost_lo_ms"] == pytest.approx(max(real.traced_ns - real.hi_ns, 0) / 1e6, abs=1e-3)
        assert figures["cost_hi_ms"] == pytest.approx(max(real.traced_ns - real.lo_ns, 0) / 1e6, abs=1e-3)


def test_the_range_holds_the_measured_median_on_at_least_eight_workloads_of_each_host() -> None:
    # host_c: workloads recorded after the fit (held out); its own few workloads all held
    for host, found in DATA["hosts"].items():
        held: set[str] = set()
        missed = []
        for rec in found["recordings"]:
            for options in rec["profiled"]:
                real = estimate(rec, options)
                if real.lo_ns <= rec["unprofiled_step_ns"] <= real.hi_ns:
                    held.add(rec["workload"])
                else:
                    missed.append((rec["workload"], options, rec["unprofiled_step_ns"], real.lo_ns, real.hi_ns))
        assert len(held) >= min(8, len({r["workload"] for r in found["recordings"]})), (host, held, missed)
        # a miss is only allowed where the profiler cost nothing measurable (the traced step
        # within the measured rounds' spread)
        for workload, options, measured, _, _ in missed:
            rec = next(r for r in found["recordings"] if r["workload"] == workload)
            traced = rec["profiled"][options]["median_device_ns"]
            assert min(rec["unprofiled_rounds_ns"]) <= traced <= max(rec["unprofiled_rounds_ns"]), (host, workload, measured)


@pytest.mark.parametrize(
    "cap", [pytest.param(c, id=f"{h}-{c['workload']}") for h, f in DATA["hosts"].items() for c in f.get("captures", [])]
)
def test_the_capture_samples_are_priced_on_their_recorded_steps(cap: dict[str, Any]) -> None:
    trace = load(ROOT / cap["trace"])
    timed = trace.meta.unprofiled_steps
    assert timed is not None and timed.step == (0, 1, 2, 3) and all(d is not None for d in timed.device_ns)
    real = window(cap["trace"]).real_step
    assert real is not None and real.source == "recorded"
    later = [d for s, d in zip(timed.step, timed.device_ns, strict=True) if s > 0]
    assert real.step_ns == round(statistics.median(later))  # type: ignore[arg-type]
    assert (real.lo_ns, real.hi_ns) == (min(later), max(later))  # type: ignore[type-var]
    # the profiler's share, from the capture's own clock: a large part of these host-bound steps
    assert 0.25 < 1 - real.step_ns / real.traced_ns < 0.6
    assert "the calibrated model estimates" in real.method


def test_traces_not_fitted_on_are_mostly_held() -> None:
    # Recorded earlier for other purposes, each step timed without the profiler in the run
    # that recorded it: decode loops (H200) and before/after pairs (H100). The range holds 23
    # of 27 (docs/window.md says which four it misses and why); a model that drifts loses more.
    samples = ROOT.parent
    found: list[tuple[str, float]] = [
        (f"decode/{t['name']}.json.gz", t["ms_per_token"]) for t in json.loads((samples / "decode" / "decode_timings.json").read_text())
    ]
    for pair in json.loads((samples / "models" / "model_timings.json").read_text()):
        found += [(f"models/model_{pair['pair']}_{side}.json.gz", pair[f"{side}_ms"]) for side in ("before", "after")]
    found += [(f"catalogue/{e['file']}", e["ms"]) for e in json.loads((samples / "catalogue" / "timings.json").read_text())]
    held = []
    for path, step_ms in found:
        result = run_one(load(samples / path), "window")
        assert isinstance(result, WindowResult)
        real = result.real_step
        assert real is not None, path
        held.append(real.lo_ns <= step_ms * 1e6 <= real.hi_ns)
    assert len(found) == 27 and sum(held) >= 22, [p for (p, _), h in zip(found, held, strict=True) if not h]
