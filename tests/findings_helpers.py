"""Helpers for the findings tests: hand-made traces (not recorded by a profiler) and running
every input analysis directly, the way the analysis runner will."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceinsight.analysis.core.base import AnalysisConfig, Inputs
from traceinsight.analysis.findings import FindingContext, FindingsResult, find
from traceinsight.analysis.sections import (
    bound,
    breakdown,
    compile,
    gaps,
    kernels,
    memory,
    ops,
    steps,
)
from traceinsight.analysis.window import spec as window
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

from .conftest import SAMPLES_DIR
from .handmade import HandMadeTrace

INPUTS = (gaps, breakdown, steps, ops, kernels, bound, memory, compile)
# Each recorded fix pair's saving timed without the profiler when it was recorded (CUDA events),
# by pair name, where the recording kept one.
UNPROFILED = {
    row["pair"]: float(row["saving_pct"])
    for name in ("fix_timings.json", "models/model_timings.json")
    for row in json.loads((SAMPLES_DIR / name).read_text())
}


def context(trace: Trace, **override: Any) -> FindingContext:
    cfg = AnalysisConfig()
    results: dict[str, Any] = {m.__name__.rsplit(".", 1)[-1]: m.run(trace, cfg) for m in INPUTS}
    # The window assessment reads the steps, as the runner gives them.
    results["window"] = window.run(trace, cfg, Inputs({"steps": results["steps"]}))
    results.update(override)
    return FindingContext(trace=trace, **results)


def findings(trace: Trace, **override: Any) -> FindingsResult:
    """The findings of a hand-made trace with their pool estimates (``replay=True`` for the
    replayed savings, which tests/integration/test_findings_replayed.py checks)."""
    override.setdefault("replay", False)
    # a hand-made trace has no profiler cost: its savings are priced on the traced step
    override.setdefault("clock", False)
    return find(context(trace, **override))


def write_h200(t: HandMadeTrace, path: Path) -> Trace:
    """A hand-made trace on a device the peaks table knows (an H200), so savings have peaks."""
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 143 * 2**30, "numSms": 132}
        ],
        "baseTimeNanoseconds": t.base_ns,
        "traceEvents": t.events,
    }
    path.write_text(json.dumps(doc))
    return load(path, cache=False)


def ids(result: FindingsResult, *, material_only: bool = True) -> list[str]:
    listed = result.findings if material_only else (*result.findings, *result.not_material)
    return [f.id for f in listed]


def by_id(result: FindingsResult, finding_id: str) -> Any:
    for f in (*result.findings, *result.not_material):
        if f.id == finding_id:
            return f
    return None
