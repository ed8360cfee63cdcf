"""Window assessment: start-up, graph capture, GPU work traced in part, degenerate steps and
profiler overhead, each on a trace that shows it; and what findings and the verdict do with it."""

from __future__ import annotations

import functools
from pathlib import Path

import polars as pl
import pytest

from tests.analyses import analysed
from tests.conftest import sample_path
from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.report import Report, analyze
from traceinsight.analysis.window.spec import WindowResult

ROOT = Path(__file__).resolve().parents[2]
TRACELENS = ROOT.parent / "shared" / "third_party" / "tracelens"
HTA = ROOT.parent / "shared" / "third_party" / "hta"
ADD = "vectorized_elementwise_kernel<4, AddFunctor<float>>"


@functools.cache
def _report(path: Path) -> Report:
    if not path.exists():
        pytest.skip(f"{path} is not here (third-party traces live in ../shared)")
    return analysed(path)  # the run's one analysis (tests/analyses.py)


def window_of(report: Report) -> WindowResult:
    result = report.sections["window"]
    assert isinstance(result, WindowResult) and result.available
    return result


def findings_of(report: Report) -> FindingsResult:
    result = report.sections["findings"]
    assert isinstance(result, FindingsResult)
    return result


# -- start-up --------------------------------------------------------------------------------


def test_cuda_start_up_leads_the_verdict_and_is_left_out_of_savings() -> None:
    # HTA's simple_add: the first .to() spends 25 s in CUDA start-up, a first conv 16 s more,
    # out of 42 s; the rest is the work.
    report = _report(HTA / "critical_path" / "simple_add_input.json.gz")
    window = window_of(report)
    startup = window.flag("startup")
    assert startup is not None and startup.limits and not window.steady
    assert "a first aten::to" in startup.evidence
    assert window.excluded_ns > 0.9 * window.window_ns
    verdict = report.headline.verdict
    assert verdict.startswith("This window is not steady state")
    assert "schedule(wait=1, warmup=2, active=3)" in verdict.split(". GPU time")[0]
    result = findings_of(report)
    if result.available:
        # Shares are of what is left; no finding claims the start-up idle.
        assert result.window_ns <= window.window_ns - window.excluded_ns + 1
        assert sum(f.saving_window_ns for f in result.findings) <= result.window_ns


def test_loading_kernel_code_is_start_up() -> None:
    # TraceLens normalization layers: one call of each layer, whose first kernel launches take
    # up to 0.33 s each (their code is loaded then).
    report = _report(TRACELENS / "normalization_layers.json.gz")
    startup = window_of(report).flag("startup")
    assert startup is not None and startup.limits
    assert "first launch(es) of a kernel (loading its code)" in startup.evidence
    assert report.headline.verdict.startswith("This window is not steady state")
    # Not "launch-bound, saving 99 %": the launches that loaded code are start-up.
    launch = by_id(findings_of(report), "launch_bound")
    assert launch is None or launch.saving_window_ns < 0.1 * window_of(report).window_ns


def test_a_blocking_copy_before_the_step_is_not_launch_bound() -> None:
    # SGLang decode: one 0.46 s blocking hipMemcpyWithStream, then a step of CUDA-graph replays.
    report = _report(TRACELENS / "sglang_decode" / "decode.json.gz")
    assert report.headline.verdict.startswith("This window is not steady state")
    launch = by_id(findings_of(report), "launch_bound")
    assert launch is None or launch.saving_window_ns < 5_000_000


def start_up_trace() -> HandMadeTrace:
    """Hand-made: a 400 ms first cudaFree with the GPU idle, then 50 ms of steady kernels queued
    ahead by a host that launches every 100 µs."""
    t = HandMadeTrace()
    t.host("aten::empty", 0, 400_010)
    t.host("cudaFree", 5, 400_000, cat="cuda_runtime")
    ts = 400_100.0
    for _ in range(500):
        t.host("aten::add", ts - 20, 6)
        t.gpu(ADD, ts, 99, launch_ts=ts - 19, launch_dur=4)
        ts += 100
    return t


def test_start_up_idle_is_no_finding_s_saving(tmp_path: Path) -> None:
    trace = write_h200(start_up_trace(), tmp_path / "startup.json")
    result = findings(trace)
    assert result.window_ns < 60_000_000  # the 400 ms of start-up are not in the shares
    assert "left out of every saving" in " ".join(result.skipped)
    assert all(f.saving_window_ns < 10_000_000 for f in (*result.findings, *result.not_material))


# -- graph capture ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        TRACELENS / "sglang_decode" / "capture_bs_32_rank0.json.gz",
        TRACELENS / "vllm_prefilldecode_piecewise" / "graph_capture_rank_0.json.gz",
        TRACELENS / "xdit_flux_aiter_sage" / "capture_trace_rank_0.json.gz",
    ],
    ids=["sglang", "vllm", "xdit"],
)
def test_a_capture_trace_gets_no_steady_state_advice(path: Path) -> None:
    report = _report(path)
    capture = window_of(report).flag("graph_capture")
    assert capture is not None and capture.limits
    verdict = report.headline.verdict
    assert verdict.startswith("This window is not steady state")
    assert "profile graph replays, not their capture" in verdict
    result = findings_of(report)
    assert not result.available and "no steady state" in (result.reason or "")
    assert "Fix first" not in verdict


# -- GPU work traced in part -----------------------------------------------------------------


def replay_trace(*, traced: bool) -> HandMadeTrace:
    """Hand-made: 10 cudaGraphLaunch replays, 1 ms apart; with ``traced`` each shows two 200 µs
    kernels 300 µs apart (idle inside the replay), without it no kernel at all."""
    t = HandMadeTrace()
    t.step(1, 0, 5_000)
    t.step(2, 5_000, 5_000)
    t.gpu(ADD, 10, 50)
    for i in range(10):
        ts = 100.0 + 1_000 * i
        t.host("aten::graph_replay", ts - 5, 10)
        corr = t.next_correlation
        t.gpu(ADD, ts + 5, 200, launch_ts=ts, launch_dur=8, launch_name="cudaGraphLaunch")
        if traced:
            t.events.append(dict(t.events[-1], ts=ts + 505, args=dict(t.events[-1]["args"], correlation=corr)))
        else:
            t.events.pop()
    t.gpu(ADD, 10_000, 50)
    return t


@pytest.mark.parametrize("traced", [True, False])
def test_replays_without_their_kernels_are_flagged(tmp_path: Path, traced: bool) -> None:
    trace = write_h200(replay_trace(traced=traced), tmp_path / "replay.json")
    report = analyze(trace)
    partial = window_of(report).flag("partial_gpu")
    assert partial is not None and partial.limits
    words = "inside CUDA-graph replays" if traced else "graph replays have no traced kernels"
    assert words in partial.evidence
    assert report.headline.verdict.startswith("This window is not steady state")


# -- steps and profiler overhead -------------------------------------------------------------


def test_a_single_step_is_said(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 100)
    t.gpu(ADD, 20, 50)
    flag = window_of(analyze(write_h200(t, tmp_path / "one.json"))).flag("steps")
    assert flag is not None and flag.title == "a single step" and not flag.limits


def test_with_stack_overhead_is_flagged_and_lowers_host_findings() -> None:
    report = analysed(sample_path("train_with_stack"))
    flag = window_of(report).flag("profiler_overhead")
    assert flag is not None and "with_stack=True" in flag.evidence
    python = report.sections["window"].to_dict()["flags"]
    assert any(f["figures"].get("python_events", 0) > 1000 for f in python)
    for f in findings_of(report).findings:
        if f.id in ("launch_bound", "host_bound", "dataloader_stall"):
            assert f.confidence != "high" and "inflated by the profiler" in f.confidence_reason


def test_profile_memory_is_flagged_and_steady_samples_are_steady() -> None:
    eager = window_of(analysed(sample_path("train_eager")))
    flag = eager.flag("profiler_overhead")
    assert flag is not None and "profile_memory=True" in flag.evidence
    assert eager.steady
    assert window_of(analysed(sample_path("tiny_kernels"))).steady
    # CUDA-graph replays dispatch their nodes a few µs apart: that is no untraced work.
    assert window_of(analysed(sample_path("fix_launch_after"))).steady
    assert window_of(analysed(sample_path("train_cudagraphs"))).steady


# -- regions when the host runs ahead ------------------------------------------------------


def test_regions_are_not_charged_for_the_queue_ahead_of_them() -> None:
    # train_eager: the host runs ahead, so Optimizer.step begins on the host while the backward
    # pass is still queued; its own kernels take ~0.34 ms.
    bound = analysed(sample_path("train_eager")).sections["bound"].regions  # type: ignore[attr-defined]
    step = bound.filter(pl.col("name").str.starts_with("Optimizer.step"))
    assert step.height >= 3
    assert (step["dur_ns"] <= 2 * step["kernel_ns"]).all(), step.select("dur_ns", "kernel_ns")
    ops = bound.filter(pl.col("kind") == "op")
    steps = bound.filter(pl.col("kind") == "step")
    assert ops["dur_ns"].max() < steps["dur_ns"].min()


def test_an_optimizer_step_inside_start_up_is_no_fusion_saving() -> None:
    # train_compiled_with_compile: the first (compiling) step's Optimizer.step holds one-time
    # idle; fusing the optimizer would not save it. Warm, the same step (train_compiled)
    # costs ~1.5 %.
    report = analysed(sample_path("train_compiled_with_compile"))
    assert report.findings is not None
    unfused = by_id(report.findings, "unfused_optimizer")
    assert unfused is None or unfused.saving_pct < 5
    assert report.headline.verdict.startswith("This window is not steady state")


def _busy_host_steps(tmp_path: Path, ops_per_step: int, step_us: float, name: str) -> Report:
    """Three steps of ``step_us``, each with ``ops_per_step`` 1 µs CPU ops and one kernel."""
    t = HandMadeTrace()
    for n in range(3):
        start = n * step_us
        t.step(n + 1, start, step_us)
        for i in range(ops_per_step):
            t.host("aten::view", start + 1 + i * (step_us - 20) / ops_per_step, 1.0)
        t.gpu(ADD, start + step_us - 12, 10)
    return analyze(write_h200(t, tmp_path / f"{name}.json"))


def test_profiler_cost_estimate_counts_host_events_per_step_and_says_its_share(tmp_path: Path) -> None:
    from traceinsight.analysis.window.realstep import COST_US

    # 98 ops + the step's own span + its launch = 100 host events per step; the step's kernel
    # is launched at its end, so the host is the whole critical path: the replay takes each
    # event's cost off the step, and the GPU's 10 µs kernel widens the low end by 5 % of it
    report = _busy_host_steps(tmp_path, 98, 1000.0, "busy")
    window = window_of(report)
    flag = window.flag("profiler_overhead")
    assert flag is not None and not flag.limits
    figures = dict(flag.figures)
    assert figures["host_events_per_step"] == 100
    lo_us, hi_us = COST_US
    # (less the cost of the events after the launch, and 5 % of the 10 µs kernel: within 5 %)
    assert figures["cost_lo_ms"] == pytest.approx(100 * lo_us / 1000, rel=0.05)
    assert figures["cost_hi_ms"] == pytest.approx(100 * hi_us / 1000 + 0.05 * 0.010, rel=0.02)
    # shares of the 1 ms step
    assert figures["cost_lo_pct"] == pytest.approx(10 * lo_us, abs=0.2)
    assert figures["cost_hi_pct"] == pytest.approx(10 * hi_us, abs=0.2)
    real = window.real_step
    # the step runs from its start to its host end, after its kernel's end (988 + 10 µs)
    assert real is not None and real.source == "model" and real.traced_ns == 1_000_000
    # the flag's figures are the RealStep's range: cost = traced − real
    assert figures["cost_lo_ms"] == pytest.approx((real.traced_ns - real.hi_ns) / 1e6, abs=1e-3)
    assert figures["cost_hi_ms"] == pytest.approx((real.traced_ns - real.lo_ns) / 1e6, abs=1e-3)
    assert "100 host events recorded per step" in flag.evidence and "timing the step without the profiler" in (flag.advice or "")
    assert "with_stack" not in flag.evidence


@pytest.mark.parametrize(("step_us", "flagged"), [(5_000.0, True), (6_000.0, False)])
def test_profiler_cost_is_a_note_from_a_tenth_of_the_step(tmp_path: Path, step_us: float, flagged: bool) -> None:
    # 100 events × 5.5 µs = 0.55 ms: 11 % of a 5 ms step, 9.2 % of a 6 ms one
    flag = window_of(_busy_host_steps(tmp_path, 98, step_us, "edge")).flag("profiler_overhead")
    assert (flag is not None) is flagged


@pytest.mark.parametrize(("step_us", "lowered"), [(2_700.0, True), (3_300.0, False)])
def test_host_findings_are_lowered_when_the_estimated_cost_is_a_tenth_of_the_step(
    tmp_path: Path, step_us: float, lowered: bool
) -> None:
    from traceinsight.analysis.window.overhead import overhead_lowers_host_findings

    # the best estimate, mid-range: 100 events × (0.6 + 5.5) / 2 µs ≈ 0.3 ms: 11 % of a 2.7 ms
    # step, 9.2 % of a 3.3 ms one
    flag = window_of(_busy_host_steps(tmp_path, 98, step_us, "lower")).flag("profiler_overhead")
    assert flag is not None and overhead_lowers_host_findings(flag) is lowered


def test_decode_loop_profiler_cost_lowers_launch_bound_and_says_why() -> None:
    # decode_eager: timed without the profiler at 5.45 ms per iteration (decode_timings.json)
    report = analysed(sample_path("decode/decode_eager"))
    window = window_of(report)
    flag = window.flag("profiler_overhead")
    assert flag is not None
    figures = dict(flag.figures)
    assert 800 <= figures["host_events_per_step"] <= 900
    assert figures["cost_pct"] >= 10.0
    real = window.real_step
    assert real is not None and real.source == "model" and real.lo_ns <= 5_450_000 <= real.hi_ns
    launch = by_id(findings_of(report), "launch_bound")
    assert launch is not None and launch.confidence == "medium"
    shares = f"an estimated {figures['cost_lo_pct']:.0f}–{figures['cost_hi_pct']:.0f} % of the step"
    assert f"inflated by the profiler ({shares})" in launch.confidence_reason


def test_profiler_cost_counts_the_busiest_thread_and_never_exceeds_the_step(tmp_path: Path) -> None:
    from traceinsight.analysis.window.realstep import COST_US

    # Two threads record ~400 events each per 1 ms step: they run side by side, so the step
    # pays for one thread's 400 (398 ops, the step, the launch), and 400 × 5.5 µs is more
    # than the step: the estimate stops at the GPU's busy time, never below.
    t = HandMadeTrace()
    for n in range(3):
        start = n * 1000.0
        t.step(n + 1, start, 1000.0)
        for i in range(398):
            t.host("aten::view", start + 1 + i * 2.4, 1.0)
            t.host("aten::view", start + 1 + i * 2.4, 1.0, tid=2)
        t.gpu(ADD, start + 988, 10)
    window = window_of(analyze(write_h200(t, tmp_path / "dense.json")))
    flag = window.flag("profiler_overhead")
    assert flag is not None
    figures = dict(flag.figures)
    assert figures["host_events_per_step"] == 400
    assert figures["cost_lo_ms"] == pytest.approx(400 * COST_US[0] / 1000, rel=0.05)
    assert figures["cost_hi_ms"] <= 1.0 and figures["cost_hi_pct"] <= 100.0
    real = window.real_step
    assert real is not None and real.lo_ns >= 0.95 * 10_000


def _late_start_trace(late_us: float, *, busy_before: bool = False) -> HandMadeTrace:
    """Two steps; each step's first kernel starts ``late_us`` after its launch call, on an idle
    GPU (unless ``busy_before``: a long kernel queued before it keeps the GPU busy)."""
    t = HandMadeTrace()
    for n, t0 in ((1, 0.0), (2, 100_000.0)):
        t.step(n, t0, 90_000)
        if busy_before:
            t.gpu("long_kernel", t0 + 10, late_us, launch_ts=t0 + 2)
        t.gpu("first_kernel", t0 + 20 + late_us, 500, launch_ts=t0 + 10, launch_dur=5)
        t.gpu("next_kernel", t0 + 600 + late_us, 500, launch_ts=t0 + 40)
    return t


def test_work_that_starts_long_after_its_launch_on_an_idle_gpu_is_flagged(tmp_path: Path) -> None:
    report = _report(_late_start_trace(20_000).write(tmp_path / "late.json"))
    flag = window_of(report).flag("late_device_start")
    assert flag is not None and flag.limits
    figures = dict(flag.figures)
    assert figures["least_late_ns"] == pytest.approx(20_005_000, abs=1_000)
    assert "clock is offset" in flag.evidence
    assert report.headline.verdict.startswith("This trace's host and device times disagree")


def test_a_short_launch_latency_or_a_busy_gpu_is_not_flagged(tmp_path: Path) -> None:
    assert window_of(_report(_late_start_trace(10).write(tmp_path / "a.json"))).flag("late_device_start") is None
    # the wait is the long kernel queued before: the GPU was busy, not idle
    busy = _report(_late_start_trace(20_000, busy_before=True).write(tmp_path / "b.json"))
    assert window_of(busy).flag("late_device_start") is None


def test_vllm_runs_whose_first_device_work_lags_its_launch() -> None:
    # vLLM on MI300X (TraceLens' test data): the first copies start 149 ms (and, in the decode
    # run, 7.8 ms) after their launch calls with the GPU idle and nothing traced between
    for name, least_ms in (("vllm_prefilldecode_piecewise", 148.0), ("vllm_decode_full", 7.0)):
        flag = window_of(_report(TRACELENS / name / "graph_execution.json.gz")).flag("late_device_start")
        assert flag is not None and flag.limits and dict(flag.figures)["least_late_ns"] >= least_ms * 1e6
