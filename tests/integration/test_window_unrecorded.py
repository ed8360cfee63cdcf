"""GPU activity not recorded: the host launched GPU work and the trace holds none of it.

Hand-made traces (written by hand, not recorded) and HTA's ``cupti_counters`` test trace, recorded
with CUPTI's range profiler (per-kernel counters in place of the kernel timeline).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.handmade import HandMadeTrace, launch
from traceinsight.analysis.report import analyze
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.render.sections.overview import render_terminal
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

HTA = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "hta"
LAUNCHES = 260


def _launches_only(tmp_path: Path, launches: int = LAUNCHES) -> Trace:
    """A training-like loop whose 260 cudaLaunchKernel calls are in the trace and whose
    kernels are not (as when the GPU's activity records were not recorded or were lost)."""
    t = HandMadeTrace()
    for i in range(launches):
        ts = 50.0 * i
        t.host("aten::mm", ts, 40)
        t.events.append(launch("cudaLaunchKernel", ts + 5, 8, i + 1, pid=100, tid=1))
    return load(t.write(tmp_path / "launches.json"), cache=False)


def _window(trace: Trace) -> WindowResult:
    result = run_one(trace, "window")
    assert isinstance(result, WindowResult)
    return result


def test_launches_without_kernels_are_their_own_window_state(tmp_path: Path) -> None:
    trace = _launches_only(tmp_path)
    assert not trace.has_gpu
    flag = _window(trace).flag("gpu_not_recorded")
    assert flag is not None and flag.limits
    assert flag.title == "GPU activity not recorded"
    assert f"cudaLaunchKernel \u00d7{LAUNCHES}" in flag.evidence
    assert dict(flag.figures)["gpu_work_calls"] == LAUNCHES
    assert flag.advice is not None and "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]" in flag.advice
    assert "CUPTI" in flag.advice


def test_the_verdict_says_the_gpu_was_not_recorded_not_that_there_was_no_gpu_work(tmp_path: Path) -> None:
    report = analyze(_launches_only(tmp_path))
    verdict = report.headline.verdict
    assert verdict.startswith("The GPU's activity was not recorded: 260 host calls put work on the GPU")
    assert "no GPU work" not in verdict.lower()
    assert "ProfilerActivity.CUDA" in verdict
    # where the host's time went is still said
    assert "Host time (self) over the traced 13.0 ms mostly in aten::mm" in verdict
    overview = report.sections["overview"]
    assert isinstance(overview, OverviewResult) and overview.unrecorded_gpu_calls == LAUNCHES
    assert "GPU activity not recorded: 260 host calls" in str(render_terminal(overview).renderables[1])  # type: ignore[attr-defined]


def test_a_cpu_only_trace_has_no_such_flag(tmp_path: Path) -> None:
    # host ops only, no launch call: the trace was recorded without CUDA activity, as asked
    t = HandMadeTrace()
    for i in range(20):
        t.host("aten::mm", 50.0 * i, 40)
    trace = load(t.write(tmp_path / "cpu.json"), cache=False)
    assert _window(trace).flag("gpu_not_recorded") is None
    verdict = analyze(trace).headline.verdict
    assert verdict.startswith("No GPU work in this trace: only the host was recorded")


def test_a_trace_with_kernels_has_no_such_flag(tmp_path: Path) -> None:
    t = HandMadeTrace()
    for i in range(5):
        t.host("aten::mm", 100.0 * i, 40)
        t.gpu("gemm", 100.0 * i + 20, 30, launch_ts=100.0 * i + 5)
    trace = load(t.write(tmp_path / "gpu.json"), cache=False)
    assert _window(trace).flag("gpu_not_recorded") is None


def test_cupti_range_profiler_trace_names_profiler_metrics() -> None:
    path = HTA / "cupti_counters.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not here (third-party traces live in ../shared)")
    report = analyze(load(path, cache=False))
    window = report.sections["window"]
    assert isinstance(window, WindowResult)
    flag = window.flag("gpu_not_recorded")
    assert flag is not None
    # 77 kernel launches, each with one range-profiler counter event instead of a kernel
    assert "cudaLaunchKernel \u00d777" in flag.evidence
    assert "77 CUPTI range-profiler events" in flag.evidence
    assert flag.advice is not None and "without experimental_config's profiler_metrics" in flag.advice
    assert report.headline.verdict.startswith("The GPU's activity was not recorded")
