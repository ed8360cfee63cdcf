"""Numbers users read, each pinned on a hand-made trace (written by hand, not recorded) where a
plausible one-line slip in the code would change it: a copy rate, a fused-optimizer time, a
threshold's edge, the ranking, an interval, a gap's cause, an op's parent, bytes of a cast,
the per-step saving in the report. Times in the builders are µs, like Kineto's.

Public entry points (``ti.analyze``, ``ti.load``, rendered Markdown) where they reach the
number; the few deeper imports are all here at the top.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceinsight as ti
from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.cost.model import op_cost
from traceinsight.analysis.lib.stats import median_ratio_ci
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.window.spec import WindowResult

ADD = "void at::native::vectorized_elementwise_kernel<4, add>"
MULTI_TENSOR = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<mul>"
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def h200_file(t: HandMadeTrace, path: Path) -> Path:
    """The trace on a device the peaks table knows (an H200), written for ``ti.analyze``."""
    write_h200(t, path)
    return path


def analyze(t: HandMadeTrace, path: Path, *only: str) -> ti.Report:
    # a hand-made trace carries no profiler cost: priced on its traced step
    return ti.analyze(h200_file(t, path), ti.AnalysisConfig(clock="traced"), only=list(only) or None, cache=False)


def finding(report: ti.Report, finding_id: str):  # type: ignore[no-untyped-def]
    result = report.findings
    for f in (*result.findings, *result.not_material):
        if f.id == finding_id:
            return f
    return None


# -- pageable copies: the pinned rate comes from copies of at least 1 MiB ----------------------


def copies_trace() -> HandMadeTrace:
    """Hand-made: a 100 MB pageable host-to-device copy at 5 GB/s (20 ms); pinned copies of
    exactly 1 MiB at 25 GB/s; many pinned copies 1 byte short of 1 MiB at 1 GB/s (small copies
    are latency-bound and say nothing about the bus)."""
    t = HandMadeTrace()
    ts = 20.0
    t.step(1, 0, 1)

    def copy(name: str, nbytes: int, dur_us: float) -> None:
        nonlocal ts
        t.host("aten::copy_", ts - 10, 9)
        t.gpu(
            name,
            ts,
            dur_us,
            cat="gpu_memcpy",
            launch_ts=ts - 8,
            launch_name="cudaMemcpyAsync",
            args={"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / dur_us / 1e3},
        )
        ts += dur_us + 20

    copy("Memcpy HtoD (Pageable -> Device)", 100_000_000, 20_000)
    for _ in range(4):
        copy("Memcpy HtoD (Pinned -> Device)", 1 << 20, (1 << 20) / 25e3)
    for _ in range(20):
        copy("Memcpy HtoD (Pinned -> Device)", (1 << 20) - 1, ((1 << 20) - 1) / 1e3)
    t.events[0]["dur"] = ts
    return t


def test_pageable_copy_saving_uses_the_pinned_rate_of_copies_of_at_least_1_mib(
    tmp_path: Path,
) -> None:
    f = finding(analyze(copies_trace(), tmp_path / "copies.json", "findings"), "pageable_memcpy")
    assert f is not None and f.confidence == "medium"
    # 100 MB at the measured 25 GB/s take 4 ms: the fix saves 16 ms of the 20 (the pool
    # estimate; the reported saving is the replay's, where the trace replays)
    assert f.estimate_ns == pytest.approx(16_000_000, rel=0.001)
    assert "(25.0 GB/s)" in f.method


# -- unfused optimizer: the fused pass at the device's bandwidth, in TB/s ------------------------


def adamw_step(t: HandMadeTrace, start: float, params: int, kernels: int = 4) -> None:
    """Hand-made: an AdamW step from ``start`` of ``kernels`` 100 µs foreach kernels 50 µs
    apart, the first 100 µs in, over ``params`` parameters (one foreach addcdiv_ with their
    shapes)."""
    t.host("Optimizer.step#AdamW.step", start, 300 + 150 * kernels, cat="user_annotation")
    shapes = [[params // 2], [params - params // 2]]
    t.host(
        "aten::_foreach_addcdiv_",
        start + 10,
        10,
        args={
            "Input Dims": [shapes, shapes, shapes, []],
            "Input type": ["TensorList", "TensorList", "TensorList", "Scalar"],
        },
    )
    ts = start + 100
    for _ in range(kernels):
        t.host("aten::_foreach_mul_", ts - 30, 20)
        t.gpu(MULTI_TENSOR, ts, 100, launch_ts=ts - 25)
        ts += 150


def optimizer_step(
    t: HandMadeTrace,
    n: int,
    start: float,
    params: int,
    *,
    kernels: int = 4,
    forward_us: float = 1_000.0,
) -> float:
    """Hand-made step ``n`` from ``start``: a forward kernel of ``forward_us``, then
    :func:`adamw_step`. Returns where the step ends."""
    end = start + forward_us + 400 + 150 * kernels
    t.step(n, start, end - start)
    t.host("aten::add", start + 5, 3)
    t.gpu(ADD, start + 10, forward_us, launch_ts=start + 6)
    adamw_step(t, start + forward_us, params, kernels)
    return end


def optimizer_trace(params: int, steps: int = 1) -> HandMadeTrace:
    """Hand-made: ``steps`` 2 ms steps of :func:`optimizer_step`: a forward kernel, then an
    AdamW step of four 100 µs foreach kernels 50 µs apart (span 550 µs)."""
    t = HandMadeTrace()
    start = 0.0
    for n in range(1, steps + 1):
        start = optimizer_step(t, n, start, params)
    return t


def test_unfused_optimizer_saving_is_the_span_minus_one_fused_pass(tmp_path: Path) -> None:
    params = 10_000_000
    report = analyze(optimizer_trace(params), tmp_path / "opt.json", "findings", "bound")
    f = finding(report, "unfused_optimizer")
    assert f is not None and f.material
    assert f.confidence == "medium"  # the parameter count and the bandwidth are known
    assert f.pool == "compute"  # its largest claim: 317 µs of kernel time against 150 µs idle
    bw_tbps = report.bound.peaks["mem_bw_tbps"]
    # 28 bytes per parameter at 70 % of the bandwidth: ~83 µs on an H200.
    fused_ns = params * 28 / (bw_tbps * 1e12 * 0.7) * 1e9
    assert 10_000 < fused_ns < 400_000
    # one step: too few to replay a steady state, so the saving is the pool estimate
    assert f.saving_window_ns == f.estimate_ns == pytest.approx(550_000 - fused_ns, rel=0.01)
    assert f.saving_pct == 23.333 and f.claim_pct is None  # of the 2 ms window, to 3 decimals
    # The 150 µs of idle between the optimizer's kernels is also host_bound's: counted once,
    # under the optimizer, and both say so.
    assert f.overlap == "its idle time is part of what host_bound reports; counted once, here"
    host = finding(report, "host_bound")
    assert host is not None
    assert host.overlap == "0.15 ms of its idle time is counted under unfused_optimizer"


def test_the_optimizer_s_launch_latency_is_counted_once_in_a_trace_without_gaps(
    tmp_path: Path,
) -> None:
    # The device never idles 10 µs (no idle gap at all): forty 3 µs optimizer kernels, each
    # waiting 7 µs for its launch. Those 273 µs inside the optimizer's span are launch_bound's
    # too: counted once, under the optimizer, as in a trace with gaps.
    t = HandMadeTrace()
    t.step(1, 0, 1_400)
    t.host("aten::add", 0, 3)
    t.gpu(ADD, 5, 995, launch_ts=1)
    t.host("Optimizer.step#AdamW.step", 995, 405, cat="user_annotation")
    for i in range(40):
        ts = 1_000.0 + 10 * i
        t.host("aten::_foreach_mul_", ts - 1, 8)
        t.gpu(MULTI_TENSOR, ts + 7, 3, launch_ts=ts)
    result = findings(write_h200(t, tmp_path / "no_gaps.json"))
    opt, launch = by_id(result, "unfused_optimizer"), by_id(result, "launch_bound")
    assert opt is not None and launch is not None
    assert opt.overlap == "its idle time is part of what launch_bound reports; counted once, here"
    assert launch.overlap == "0.27 ms of its idle time is counted under unfused_optimizer"


def test_the_note_of_time_counted_under_a_narrower_finding_is_in_ms_to_two_decimals(
    tmp_path: Path,
) -> None:
    # One 25 µs gap between the optimizer's four back-to-back kernels, the host in untraced
    # work: host_bound's idle, counted under unfused_optimizer. 0.025 ms reads 0.03 ms.
    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    t.host("aten::add", 5, 3)
    t.gpu(ADD, 10, 1_090, launch_ts=6)
    t.host("Optimizer.step#AdamW.step", 1_000, 900, cat="user_annotation")
    for ts in (1_100, 1_200, 1_325, 1_425):
        t.host("aten::_foreach_mul_", ts - 3, 2)
        t.gpu(MULTI_TENSOR, ts, 100, launch_ts=ts - 2)
    host = by_id(findings(write_h200(t, tmp_path / "note.json")), "host_bound")
    assert host is not None
    assert host.overlap == "0.03 ms of its idle time is counted under unfused_optimizer"


def test_the_parameter_count_is_addcdiv_s_and_the_fused_pass_is_priced_to_the_ns(
    tmp_path: Path,
) -> None:
    # 12 M parameters × 28 bytes at 70 % of the H200's 4.8 TB/s: a fused pass of 100 µs to the
    # ns, so the saving is 550 - 100 µs exactly. AdamW's foreach step first adds one to its step
    # counters (one 0-d tensor per parameter): that op is not where the parameters are counted.
    t = optimizer_trace(12_000_000)
    t.host(
        "aten::_foreach_add_",
        1_005,
        3,
        args={"Input Dims": [[[], []], []], "Input type": ["TensorList", "Scalar"]},
    )
    f = finding(analyze(t, tmp_path / "opt.json", "findings"), "unfused_optimizer")
    assert f is not None
    assert dict(f.evidence.figures)["params"] == 12_000_000
    assert "12,000,000 parameters" in f.method
    assert f.estimate_ns == 550_000 - 100_000


def test_the_parameter_count_is_the_first_input_of_a_broadcasting_addcdiv_(tmp_path: Path) -> None:
    # A per-parameter (for-loop) step whose addcdiv_ divides by a per-row statistic that
    # broadcasts ([4096, 1] over [4096, 1024]): the parameters are its first input only.
    t = optimizer_trace(10_000_000)
    t.events = [e for e in t.events if e["name"] != "aten::_foreach_addcdiv_"]
    for ts in (1_010, 1_030):
        t.host(
            "aten::addcdiv_",
            ts,
            10,
            args={
                "Input Dims": [[4096, 1024], [4096, 1], [4096, 1024], []],
                "Input type": ["float", "float", "float", "Scalar"],
            },
        )
    f = finding(analyze(t, tmp_path / "opt.json", "findings"), "unfused_optimizer")
    assert f is not None and dict(f.evidence.figures)["params"] == 2 * 4096 * 1024


def test_idle_before_the_optimizer_in_its_step_is_not_the_optimizer_s(tmp_path: Path) -> None:
    # Two steps; in the second, the forward pass waits 200 µs in cudaMalloc between two kernels
    # (the device idle meanwhile). That idle is allocator_churn's alone: the optimizer's span
    # starts at its first kernel, later in the step.
    t = HandMadeTrace()
    end = optimizer_step(t, 1, 0.0, 10_000_000)
    t.step(2, end, 2_000)
    t.host("aten::add", end + 5, 3)
    t.gpu(ADD, end + 10, 490, launch_ts=end + 6)
    t.host("cudaMalloc", end + 500, 200, cat="cuda_runtime")
    t.host("aten::add", end + 705, 3)
    t.gpu(ADD, end + 710, 300, launch_ts=end + 706)
    adamw_step(t, end + 1_000, 10_000_000)
    result = findings(write_h200(t, tmp_path / "malloc.json"))
    assert by_id(result, "unfused_optimizer") is not None
    churn = by_id(result, "allocator_churn")
    assert churn is not None and churn.saving_window_ns == 200_000
    assert churn.overlap is None
    assert churn.confidence_reason == (
        "1 allocator calls in steady-state steps (warm-up step left out), 0.20 ms of host time"
    )
    # and no sync anywhere: no host_sync, not even one saving nothing
    assert by_id(result, "host_sync") is None


@pytest.mark.parametrize(("once_us", "steps_read"), [((0, 500), 3), ((1_000, 1_900), 2)])
def test_one_time_work_leaves_out_only_the_optimizer_steps_it_overlaps(
    tmp_path: Path, once_us: tuple[int, int], steps_read: int
) -> None:
    # Three steps; one-time work (start-up, compilation) in the first step's forward pass
    # leaves every optimizer step in; over the first optimizer step, it leaves that one out.
    trace = write_h200(optimizer_trace(10_000_000, steps=3), tmp_path / "once.json")
    once = pl.DataFrame({"start_ns": [once_us[0] * 1_000], "end_ns": [once_us[1] * 1_000]})
    f = by_id(findings(trace, window=WindowResult(excluded=once)), "unfused_optimizer")
    assert f is not None
    assert f.evidence.regions[0].calls == steps_read
    assert f.evidence.regions[0].dur_ns == steps_read * 550_000


def test_the_warmup_step_s_extra_optimizer_kernels_are_not_counted_per_step(tmp_path: Path) -> None:
    # The first step is slow (a 3 ms forward pass) and its optimizer step also creates the
    # state (eight kernels); the two steady steps run four: four per step, as the title says.
    t = HandMadeTrace()
    end = optimizer_step(t, 1, 0.0, 10_000_000, kernels=8, forward_us=3_000)
    for n in (2, 3):
        end = optimizer_step(t, n, end, 10_000_000)
    result = findings(write_h200(t, tmp_path / "warm.json"))
    f = by_id(result, "unfused_optimizer")
    assert f is not None
    assert f.title.startswith("The optimizer step runs as 4 kernels per step")
    assert dict(f.evidence.figures)["kernels_per_step"] == 4.0


# -- the ranking: by share of the time, not by the saving's ns ------------------------------------


def stalls_trace(steps: int = 4, stall_us: float = 1_500.0) -> HandMadeTrace:
    """Hand-made: ``steps`` 10 ms steps, each with a DataLoader stall of ``stall_us``."""
    t = HandMadeTrace()
    for s in range(steps):
        base = s * 10_000.0
        t.step(s + 1, base, 10_000)
        t.host("aten::add", base + 1, 3)
        t.gpu(ADD, base + 10, 4_990, launch_ts=base + 2)
        t.host(DATALOADER, base + 4_995, stall_us - 1, cat="user_annotation")
        t.host("aten::add", base + 5_000 + stall_us - 5, 3)
        t.gpu(
            ADD, base + 5_000 + stall_us, 5_000 - stall_us - 10, launch_ts=base + 4_996 + stall_us
        )
    return t


def test_findings_are_ranked_by_share_not_by_saving_ns(tmp_path: Path) -> None:
    # A per-step finding (the stall: saving_ns per step) with the larger share, and a one-off
    # one (a compile inside the window: saving_ns over the window) with more ns but a smaller
    # share.
    trace = write_h200(stalls_trace(), tmp_path / "rank.json")
    comp = CompileResult(steps=4, compiles_in_trace=1, recompiles_in_trace=0, compile_ns=2_200_000)
    result = findings(trace, compile=comp)
    stall, compile_ = by_id(result, "dataloader_stall"), by_id(result, "compile_in_window")
    assert stall is not None and compile_ is not None
    assert stall.saving_pct > compile_.saving_pct and compile_.saving_ns > stall.saving_ns
    order = [f.id for f in result.findings]
    assert order.index("dataloader_stall") < order.index("compile_in_window")
    pcts = [f.saving_pct for f in result.findings]
    assert pcts == sorted(pcts, reverse=True)
    # Both claim the idle time (6 ms of stalls + 2.2 ms of compile > 6.08 ms idle): each claim
    # is scaled by the same factor so that together they fit it, and the notes say so.
    assert stall.saving_window_ns + compile_.saving_window_ns == pytest.approx(6_080_000, abs=2)
    assert compile_.saving_window_ns / stall.saving_window_ns == pytest.approx(2.2 / 6.0, rel=1e-3)
    assert stall.overlap is not None and "compile_in_window" in stall.overlap
    assert "scaled by 0.74" in stall.overlap
    assert compile_.overlap is not None and "by dataloader_stall:" in compile_.overlap
    # Shares are given to 3 decimals: 4.449 ms of 40 ms.
    assert stall.saving_pct == pytest.approx(11.122, abs=1e-9)
    # Per step, that share of the mean step (10 ms: each step's host code ends after its
    # kernels, so the step is the host's): 1.112 ms, to the ns (from the unrounded share).
    assert result.step_ns == 10_000_000 and stall.saving_ns == 1_112_195


def test_even_a_1_ns_claim_on_a_shared_pool_says_it_was_scaled(tmp_path: Path) -> None:
    # The stalls and a compile claim more idle than there is (scaled by 0.74); an AdamW step
    # at the end of the last step, its four kernels back to back but for one 1 ns gap, claims
    # that 1 ns of idle too, and says so like the others.
    t = stalls_trace()
    t.host("Optimizer.step#AdamW.step", 39_980, 19, cat="user_annotation")
    ts = 39_990.0
    for i in range(4):
        t.host("aten::_foreach_mul_", 39_981 + i, 0.5)
        t.gpu(MULTI_TENSOR, ts, 2, launch_ts=39_981 + i)
        ts += 2 + (0.001 if i == 1 else 0)
    comp = CompileResult(steps=4, compiles_in_trace=1, recompiles_in_trace=0, compile_ns=2_200_000)
    result = findings(write_h200(t, tmp_path / "one_ns.json"), compile=comp)
    opt = by_id(result, "unfused_optimizer")
    assert opt is not None and opt.estimate_ns == 4_000 + 1  # 4 µs of kernel time, 1 ns idle
    assert opt.overlap == (
        "idle time is also claimed by dataloader_stall, compile_in_window: claims scaled by 0.74 "
        "so that together they fit the idle time"
    )


# -- the rendered report: "per step" is the per-step saving --------------------------------------


def test_report_prints_the_per_step_saving_per_step(tmp_path: Path) -> None:
    report = analyze(stalls_trace(), tmp_path / "steps.json")
    f = finding(report, "dataloader_stall")
    assert f is not None and f.per_step and f.material
    # Four steps: the whole-window saving is four times the per-step one.
    assert f.saving_window_ns == pytest.approx(4 * f.saving_ns, rel=0.01)
    assert f.saving_ns == pytest.approx(1_500_000, rel=0.02)
    # Per step: the share of the mean step.
    step_ns = report.findings.step_ns
    assert f.saving_ns == pytest.approx(f.saving_pct / 100 * step_ns, rel=1e-4)
    text = report.to_markdown()
    per_step = f"{f.saving_ns / 1e6:.2f} ms per step"
    assert per_step in text
    assert f"{f.saving_window_ns / 1e6:.2f} ms per step" not in text


# -- the bootstrap interval is a 95 % one ----------------------------------------------------------


def test_bootstrap_interval_is_95_percent_by_default() -> None:
    # Before: all 1.0. After: 20 runs, two of them 1.0 and the rest 0.0; with the mean, each
    # resample's ratio is k/20 with k ~ Binomial(20, 0.1): P(k <= 4) = 0.957, P(k <= 5) = 0.989.
    # So the 97.5th percentile is 5/20 and the 95th (a 90 % interval's top) 4/20.
    before = np.ones(20)
    after = np.zeros(20)
    after[:2] = 1.0
    ratio, lo, hi = median_ratio_ci(before, after, n_boot=20_000, seed=3, statistic="mean")
    assert ratio == pytest.approx(0.1)
    assert (lo, hi) == (0.0, pytest.approx(0.25))
    _, _, hi90 = median_ratio_ci(
        before, after, n_boot=20_000, seed=3, statistic="mean", confidence=0.90
    )
    assert hi90 == pytest.approx(0.20)


# -- gap causes: a launch still running when the gap began did not queue its work ---------------


def launch_gap_trace(launch_from: float, launch_to: float) -> HandMadeTrace:
    """Hand-made: a kernel until 1000 µs, then idle until the next kernel at 1100 µs, whose
    launch call runs from ``launch_from`` to ``launch_to`` inside aten::add."""
    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    t.host("aten::mul", 1, 5)
    t.gpu(ADD, 10, 990, launch_ts=2)
    t.host("aten::add", launch_from - 2, launch_to - launch_from + 4)
    t.gpu(ADD, 1_100, 800, launch_ts=launch_from, launch_dur=launch_to - launch_from)
    return t


@pytest.mark.parametrize(
    ("launch_from", "launch_to", "cause"),
    [
        # Started before the gap, returned inside it: the host was still launching.
        (990.0, 1_095.0, "launch_overhead"),
        # Returned exactly when the gap began: the work was queued, the device was waiting on it.
        (900.0, 1_000.0, "device_wait"),
    ],
)
def test_gap_cause_reads_when_the_launch_returned(
    tmp_path: Path, launch_from: float, launch_to: float, cause: str
) -> None:
    gaps = analyze(launch_gap_trace(launch_from, launch_to), tmp_path / "g.json", "gaps").gaps.gaps
    row = gaps.filter(pl.col("start_ns") == 1_000_000)
    assert row.height == 1
    assert row["end_ns"][0] == 1_100_000
    assert row["cause"][0] == cause


# -- linking: a zero-length call nests in the op around it --------------------------------------


def test_zero_length_runtime_call_nests_inside_its_op(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 100)
    t.host("aten::item", 10, 40)
    t.host("aten::_local_scalar_dense", 12, 30)
    t.host("cudaStreamSynchronize", 20, 0, cat="cuda_runtime")
    t.host("aten::add", 60, 10)
    t.host("aten::empty", 65, 0)
    trace = ti.load(h200_file(t, tmp_path / "zero.json"), cache=False)
    ev = trace.events.select("id", "parent", pl.col("name").cast(pl.String))
    name_of = dict(zip(ev["id"].to_list(), ev["name"].to_list(), strict=True))
    parent_of = {
        n: name_of.get(p) for n, p in zip(ev["name"].to_list(), ev["parent"].to_list(), strict=True)
    }
    assert parent_of["cudaStreamSynchronize"] == "aten::_local_scalar_dense"
    assert parent_of["aten::_local_scalar_dense"] == "aten::item"
    assert parent_of["aten::empty"] == "aten::add"
    assert parent_of["aten::add"] == "ProfilerStep#1"


# -- cost model: a cast to fp16 writes 2 bytes per element ----------------------------------------


@pytest.mark.parametrize(("code", "out_bytes"), [(5, 2), (15, 2), (6, 4), (7, 8), (11, 1)])
def test_to_copy_bytes_follow_the_target_dtype_code(code: int, out_bytes: int) -> None:
    # aten::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format) on
    # 100 float32 elements: 400 bytes read, 100 elements of the target dtype written.
    # Codes: 5 Half, 15 BFloat16, 6 float, 7 double, 11 bool.
    c = op_cost(
        "aten::_to_copy",
        json.dumps([[100], [], [], [], [], [], []]),
        json.dumps(["float", "Scalar", "", "", "", "Scalar", ""]),
        json.dumps(["", str(code), "", "", "", "False", ""]),
    )
    assert c is not None and c.bytes == 400 + 100 * out_bytes
