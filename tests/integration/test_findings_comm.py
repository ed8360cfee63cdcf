"""Communication findings on hand-made traces (written by hand, not recorded by a profiler):
what each collective is decides the finding and its fix.

Kernel names are real ones (NCCL's, from the H200 DDP sample and the HTA traces); the timings
are made up to put each case on one side of its threshold.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.findings_helpers import by_id, context, findings, write_h200
from tests.handmade import HandMadeTrace, write_trace
from traceinsight.analysis.findings.catalogue import MATERIALITY_PCT
from traceinsight.analysis.findings.detect.comm import detect_allreduce_per_parameter
from traceinsight.analysis.findings.read.collectives import comm_kernels, host_calls
from traceinsight.analysis.whatif.transforms import ScaleKernels
from traceinsight.trace.loader import load

ADD = "void at::native::vectorized_elementwise_kernel<4, add>"
GEMM_BWD = "autograd::engine::evaluate_function: MmBackward0"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALLGATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
SENDRECV = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
COMM_IDS = ("exposed_communication", "exposed_all_to_all", "allreduce_per_parameter", "cpu_collectives")


def _backward(t: HandMadeTrace, start: float, dur: float) -> None:
    """Backward-pass compute: one kernel launched from inside the autograd engine."""
    t.host(GEMM_BWD, start, 10)
    t.gpu(ADD, start + 10, dur, launch_ts=start + 2)


def _allreduce(t: HandMadeTrace, ts: float, elements: int, dur: float, *, stream: int = 20) -> None:
    t.host("c10d::allreduce_", ts, 4, args={"Input Dims": [[[elements]], [], [], [], [], []]})
    t.host("nccl:all_reduce", ts + 1, 3, cat="user_annotation")
    t.gpu(ALLREDUCE, ts + 8, dur, launch_ts=ts + 2, stream=stream, args={"Collective name": "allreduce"})


def per_parameter_trace(calls: int, elements: int = 1_024) -> HandMadeTrace:
    """Three steps: 2 ms of backward compute, then ``calls`` all-reduces of ``elements`` fp32
    values one after the other (one per parameter: as many AccumulateGrad ops), nothing
    overlapping them."""
    t = HandMadeTrace()
    step_us = 2_200 + calls * 30 + 200
    for s in range(3):
        base = s * step_us
        t.step(s + 1, base, step_us)
        _backward(t, base + 10, 2_000)
        for i in range(calls):
            t.host("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", base + 20 + i * 5, 2)
        for i in range(calls):
            _allreduce(t, base + 2_200 + i * 30, elements, 20)
    return t


def bucketed_trace() -> HandMadeTrace:
    """Three steps: one 25 MB all-reduce that runs under the backward pass's compute."""
    t = HandMadeTrace()
    for s in range(3):
        base = s * 4_000
        t.step(s + 1, base, 4_000)
        _backward(t, base + 10, 3_500)
        _allreduce(t, base + 1_000, 6_553_600, 2_000)
    return t


def test_one_bucketed_overlapped_allreduce_is_no_finding(tmp_path: Path) -> None:
    result = findings(write_h200(bucketed_trace(), tmp_path / "bucketed.json"))
    for fid in COMM_IDS:
        assert by_id(result, fid) is None, fid


def test_collective_calls_and_kinds_are_read(tmp_path: Path) -> None:
    trace = write_h200(per_parameter_trace(40), tmp_path / "t.json")
    calls = host_calls(trace)
    assert calls.height == 120 and set(calls["collective"]) == {"allreduce"}
    assert set(calls["elements"]) == {1_024}
    kernels = comm_kernels(trace)
    assert kernels.height == 120 and set(kernels["collective"]) == {"allreduce"}


def test_two_hundred_tiny_allreduces_after_backward(tmp_path: Path) -> None:
    trace = write_h200(per_parameter_trace(200), tmp_path / "pp.json")
    result = findings(trace)
    f = by_id(result, "allreduce_per_parameter")
    assert f is not None and f.material
    figures = dict(f.evidence.figures)
    assert figures["allreduce_calls_per_step"] == 200 and figures["grad_tensors_per_step"] == 200
    assert figures["buckets"] == 1
    # The span of 200 calls 30 µs apart is ~6 ms; one bucket costs one call (30 µs).
    assert 5.6e6 <= f.saving_ns <= 6.0e6, f.saving_ns
    assert f.confidence in ("high", "medium")
    assert "DistributedDataParallel" in f.fix and "_flatten_dense_tensors" in f.fix
    # the fix as a what-if: the all-reduce kernels shrink to what one bucket costs
    est = detect_allreduce_per_parameter(context(trace))
    assert est is not None
    (scale,) = est.transforms
    assert isinstance(scale, ScaleKernels) and scale.factor < 0.02
    # The exposed collectives are this finding's: the generic one does not double count them.
    exposed = by_id(result, "exposed_communication")
    assert exposed is None or exposed.saving_ns + f.saving_ns <= 6.1e6 + 2.2e6


def test_buckets_but_the_last_hide_under_backward(tmp_path: Path) -> None:
    # 64 calls of 4 MiB: 11 buckets of 25 MiB. DDP reduces all but the last under the 2 ms of
    # backward compute, so the saving is the whole ~1.92 ms span less one bucket's call.
    result = findings(write_h200(per_parameter_trace(64, 1_048_576), tmp_path / "big.json"))
    f = by_id(result, "allreduce_per_parameter")
    assert f is not None
    figures = dict(f.evidence.figures)
    assert figures["buckets"] == 11
    assert figures["hidden_by_backward_ns_per_step"] == pytest.approx(10 * figures["call_ns"], rel=0.01)
    assert 1.7e6 <= f.saving_ns <= 1.95e6, f.saving_ns  # without the hidden part: ~1.5 ms


def test_a_few_allreduces_are_not_per_parameter(tmp_path: Path) -> None:
    result = findings(write_h200(per_parameter_trace(8), tmp_path / "few.json"))
    assert by_id(result, "allreduce_per_parameter") is None


def all_to_all_trace(framework_span: str | None) -> HandMadeTrace:
    """Three steps: dense compute, then a 1 ms all-to-all (NCCL SendRecv kernels under the
    nccl:all_to_all span) with nothing overlapping it."""
    t = HandMadeTrace()
    for s in range(3):
        base = s * 3_000
        t.step(s + 1, base, 3_000)
        if framework_span:
            t.host(framework_span, base + 1, 2_900, cat="user_annotation")
        t.host("aten::mm", base + 5, 3)
        t.gpu(ADD, base + 10, 1_500, launch_ts=base + 6)
        t.host("c10d::alltoall_base_", base + 1_600, 20, args={"Input Dims": [[1024, 256], [1024, 256], [], [], []]})
        t.host("nccl:all_to_all", base + 1_601, 15, cat="user_annotation")
        t.gpu(SENDRECV, base + 1_620, 1_000, launch_ts=base + 1_605, stream=20)
    return t


@pytest.mark.parametrize("framework_span", [None, "## sparse_data_dist ## KJTAllToAll"])
def test_exposed_all_to_all_gets_the_embedding_fix(tmp_path: Path, framework_span: str | None) -> None:
    result = findings(write_h200(all_to_all_trace(framework_span), tmp_path / "a2a.json"))
    f = by_id(result, "exposed_all_to_all")
    assert f is not None and f.material
    assert "TrainPipelineSparseDist" in f.fix
    assert "bucket_cap_mb" not in f.fix and "no_sync" not in f.fix
    # 1 ms of each 3 ms step, less the last step's share of the window
    assert 0.8e6 <= f.saving_ns <= 1.05e6
    assert by_id(result, "exposed_communication") is None


def fsdp_trace() -> HandMadeTrace:
    """FSDP: each step all-gathers the next block's parameters with no compute beside it."""
    t = HandMadeTrace()
    for s in range(3):
        base = s * 3_000
        t.step(s + 1, base, 3_000)
        t.host("FullyShardedDataParallel.forward", base + 1, 2_950, cat="user_annotation")
        t.host("c10d::_allgather_base_", base + 5, 10, args={"Input Dims": [[4194304], [2097152], []]})
        t.host("nccl:_all_gather_base", base + 6, 8, cat="user_annotation")
        t.gpu(ALLGATHER, base + 20, 800, launch_ts=base + 8, stream=20)
        t.host("aten::mm", base + 830, 3)
        t.gpu(ADD, base + 840, 2_000, launch_ts=base + 832)
    return t


def test_fsdp_all_gather_gets_the_fsdp_fix(tmp_path: Path) -> None:
    result = findings(write_h200(fsdp_trace(), tmp_path / "fsdp.json"))
    f = by_id(result, "exposed_communication")
    assert f is not None and f.material
    assert "forward_prefetch" in f.fix and "backward_prefetch" in f.fix and "limit_all_gathers" in f.fix
    assert "reshard_after_forward" in f.fix
    assert "bucket_cap_mb" not in f.fix
    assert "allgather" in f.title
    assert by_id(result, "exposed_all_to_all") is None


def cpu_only_trace(calls: int) -> list[dict[str, object]]:
    """A CPU-only gloo job: per step, host compute then ``calls`` gloo all-reduces on gloo's
    worker thread, each 100 µs, the main thread waiting."""
    t = HandMadeTrace()
    step_us = 2_000 + calls * 120
    for s in range(3):
        base = s * step_us
        t.step(s + 1, base, step_us)
        t.host("aten::mm", base + 10, 1_900)
        for i in range(calls):
            ts = base + 2_000 + i * 120
            t.host("c10d::allreduce_", ts, 5, args={"Input Dims": [[[4096]], [], [], [], [], []]})
            t.host("gloo:all_reduce", ts + 10, 100, cat="user_annotation", tid=77)
    return t.events


def test_gloo_collectives_on_a_cpu_only_trace(tmp_path: Path) -> None:
    trace = load(write_trace(tmp_path / "cpu.json", cpu_only_trace(50), baseTimeNanoseconds=1_700_000_000_000_000_000), cache=False)
    result = findings(trace)
    assert result.available
    f = by_id(result, "cpu_collectives")
    assert f is not None and f.material
    share = dict(f.evidence.figures)["host_collective_ns"] / dict(f.evidence.figures)["host_window_ns"]
    assert 0.55 < share < 0.65  # 50 × 100 µs of each 8 ms step
    assert "fewer and larger" in f.fix
    assert f.saving_pct >= MATERIALITY_PCT


def gloo_gpu_trace() -> HandMadeTrace:
    """gloo on CUDA tensors: per step 1 ms of compute, then two 3 ms gloo all-reduces (on
    gloo's thread) while the GPU idles."""
    t = HandMadeTrace()
    for s in range(3):
        base = s * 8_000
        t.step(s + 1, base, 8_000)
        t.host("aten::mm", base + 5, 3)
        t.gpu(ADD, base + 10, 1_000, launch_ts=base + 6)
        for i in range(2):
            ts = base + 1_100 + i * 3_100
            t.host("c10d::allreduce_", ts, 5, args={"Input Dims": [[[262144]], [], [], [], [], []]})
            t.host("gloo:all_reduce", ts + 10, 3_000, cat="user_annotation", tid=77)
        t.host("aten::add_", base + 7_500, 3)
        t.gpu(ADD, base + 7_510, 400, launch_ts=base + 7_504)
    return t


def test_gloo_on_cuda_tensors_names_nccl(tmp_path: Path) -> None:
    result = findings(write_h200(gloo_gpu_trace(), tmp_path / "gloo.json"))
    f = by_id(result, "cpu_collectives")
    assert f is not None and f.material
    assert "init_process_group('nccl')" in f.fix
    # ~6 ms of GPU idle per 8 ms step under gloo, less the NCCL floor for 2 MiB
    assert 4.5e6 < f.saving_ns < 6.2e6
    assert by_id(result, "allreduce_per_parameter") is None


# Kernel names as they appear in public profiles (vLLM/SGLang on ROCm, aiter, torch's
# symmetric memory); they carry no "Collective name" arg, so only the name says what they are.
CUSTOM_ALLREDUCE = (
    "quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half, CodecQ4<__half,4>, true>, __half>",
    "aiter::cross_device_reduce_2stage",
    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
)


@pytest.mark.parametrize("name", CUSTOM_ALLREDUCE)
def test_custom_allreduce_kernels_count_as_communication(tmp_path: Path, name: str) -> None:
    from traceinsight.analysis.core.base import AnalysisConfig
    from traceinsight.analysis.sections import breakdown

    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    t.gpu(ADD, 10, 500, launch_ts=2)
    t.gpu(name, 600, 1_000, launch_ts=590, stream=20)
    trace = write_h200(t, tmp_path / "custom.json")
    shares = {r["category"]: r["dur_ns"] for r in breakdown.run(trace, AnalysisConfig()).by_device.iter_rows(named=True)}
    assert shares["communication"] == 1_000_000
    assert set(comm_kernels(trace)["collective"]) == {"allreduce"}
    f = by_id(findings(trace), "exposed_communication")
    assert f is not None and f.evidence.regions[0].name == "allreduce"
