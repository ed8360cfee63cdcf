"""Every registered analysis runs on every trace the loader accepts: real samples and hand-made
edge cases (CPU only, no steps, almost empty, GPU work without launches, two devices)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.analyses import analysed
from tests.conftest import sample_names, sample_path
from tests.handmade import HandMadeTrace
from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.registry import ANALYSES
from traceinsight.analysis.runner import run_closure
from traceinsight.errors import TraceFormatError
from traceinsight.render.terminal import make_console, section_renderable
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace


def cpu_only(t: HandMadeTrace) -> None:
    t.step(1, 0, 50)
    t.host("aten::add", 5, 10)
    t.host("aten::mul", 20, 10)


def no_steps(t: HandMadeTrace) -> None:
    t.host("aten::mm", 0, 20)
    t.gpu("gemm", 10, 30, launch_ts=2)
    t.gpu("Memcpy DtoH (Device -> Pageable)", 50, 5, cat="gpu_memcpy", launch_name="cudaMemcpy")


def one_event(t: HandMadeTrace) -> None:
    t.host("aten::empty", 0, 0)


def no_events(t: HandMadeTrace) -> None:
    pass


def gpu_without_launches(t: HandMadeTrace) -> None:
    t.step(3, 0, 10)
    t.events.append(
        {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 7}}
    )


def two_devices(t: HandMadeTrace) -> None:
    for step in range(3):
        base = 100.0 * step
        t.step(step, base, 100)
        t.host("aten::mm", base + 5, 30)
        t.gpu("gemm", base + 20, 40, launch_ts=base + 10, device=0)
        t.gpu("ncclDevKernel_AllReduce", base + 30, 20, launch_ts=base + 12, device=1, stream=20)
        t.gpu("Memset (Device)", base + 70, 1, cat="gpu_memset", launch_ts=base + 60, device=1)


HAND_MADE: dict[str, Callable[[HandMadeTrace], None]] = {
    "cpu_only": cpu_only,
    "no_steps": no_steps,
    "one_event": one_event,
    "gpu_without_launches": gpu_without_launches,
    "two_devices": two_devices,
}


def _hand_made(name: str, tmp_path: Path) -> Trace:
    t = HandMadeTrace()
    HAND_MADE[name](t)
    return load(t.write(tmp_path / f"{name}.json"), cache=False)


def _check(trace: Trace | None, results: Mapping[str, Result] | None = None) -> None:
    config = AnalysisConfig()
    console = make_console(file=io.StringIO(), width=120)
    if results is None:
        assert trace is not None
        results = run_closure(trace, config, [spec.name for spec in ANALYSES])
    for spec in ANALYSES:
        result = results[spec.name]
        assert isinstance(result, Result), spec.name
        assert result.available or result.reason, f"{spec.name}: unavailable without a reason"
        json.dumps(result.to_dict(), allow_nan=False)
        result.to_polars()
        console.print(section_renderable(spec.name, result))


@pytest.mark.parametrize("name", sample_names())
def test_all_analyses_on_sample(name: str) -> None:
    # The run's one analysis of the sample (tests/analyses.py): every registered analysis is a section of it.
    _check(None, analysed(sample_path(name)).sections)


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_all_analyses_on_hand_made_edge_case(name: str, tmp_path: Path) -> None:
    _check(_hand_made(name, tmp_path))


def test_a_trace_without_events_is_rejected_by_name(tmp_path: Path) -> None:
    """No analysis runs on a file without events: the loader says which file and why."""
    t = HandMadeTrace()
    no_events(t)
    path = t.write(tmp_path / "no_events.json")
    with pytest.raises(TraceFormatError, match=r"no_events\.json.*no events"):
        load(path, cache=False)


def test_timeline_analyses_are_registered() -> None:
    names = {spec.name for spec in ANALYSES}
    assert {"breakdown", "gaps", "steps"} <= names
