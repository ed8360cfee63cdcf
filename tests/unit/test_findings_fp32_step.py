"""An fp32 training step whose GEMMs run CUDA-core kernels (``cutlass_80_simt_sgemm_*_align1``
forward, ``sm80_xmma_gemm_f32f32_*_ffma`` backward, 85 % of kernel time) is priced by
fp32_no_tensor_cores as the TF32 rerun of those GEMMs, pooled and replayed. Hand-made traces
(written by hand, not recorded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.findings.catalogue import TENSOR_CORE_EFFICIENCY

SIMT = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)"
XMMA = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trt"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar>"
M, K, N = 4096, 1024, 1024
FLOPS = 2 * M * K * N
GEMM_US = FLOPS / 40e12 * 1e6  # ~40 TFLOP/s: fp32 on CUDA cores of an H200 (67 TFLOP/s peak)
OTHER_US = GEMM_US * 0.15 / 0.85  # GEMMs 85 % of the kernel time
LAYERS = 6
TF32_RATE = 494.5e12 * TENSOR_CORE_EFFICIENCY  # the H200's TF32 peak at the assumed efficiency


def fp32_training_step(steps: int = 4, host_us: float = 0.0, events_per_layer: int = 0) -> HandMadeTrace:
    """``steps`` ProfilerSteps of a 6-layer MLP in fp32: forward addmm (SIMT sgemm) and ReLU on
    the main thread, backward mm (xmma ffma) and threshold_backward on autograd's thread, a
    synchronize at the end of each step. ``host_us`` more host time per layer and pass: at 0
    the host launches far ahead and the GPU is always busy; at a few hundred µs the traced host
    is the critical path (as the profiler's own cost makes an eager step). ``events_per_layer``:
    that many more recorded 4 µs ops per layer and pass (views, checks): host time made of
    recorded events, each of which costs the profiler some of it."""
    t = HandMadeTrace()
    ts = 0.0
    for step in range(steps):
        start = ts
        t.step(step + 1, ts, 0)
        step_event = t.events[-1]
        gpu = ts + 15
        ts += 5
        for _ in range(LAYERS):
            t.host("aten::linear", ts, 8, args={"Input Dims": [[M, K], [N, K], [N]], "Input type": ["float"] * 3})
            t.host("aten::addmm", ts + 1, 6, args={"Input Dims": [[N], [M, K], [K, N]], "Input type": ["float"] * 3})
            gpu = max(gpu, ts + 4)
            t.gpu(SIMT, gpu, GEMM_US, launch_ts=ts + 2)
            gpu += GEMM_US
            t.host("aten::relu", ts + 10, 5)
            gpu = max(gpu, ts + 13)
            t.gpu(RELU, gpu, OTHER_US, launch_ts=ts + 11)
            gpu += OTHER_US
            for i in range(events_per_layer):
                t.host("aten::view", ts + 20 + 4 * i, 3.5)
            ts += 20 + host_us + 4 * events_per_layer
        for _ in range(LAYERS):
            t.host("MmBackward0", ts, 12, tid=2)
            t.host("aten::mm", ts + 1, 8, tid=2, args={"Input Dims": [[M, N], [N, K]], "Input type": ["float"] * 2})
            gpu = max(gpu, ts + 4)
            t.gpu(XMMA, gpu, GEMM_US, launch_ts=ts + 2, tid=2)
            gpu += GEMM_US
            t.host("aten::threshold_backward", ts + 13, 5, tid=2)
            gpu = max(gpu, ts + 16)
            t.gpu(RELU, gpu, OTHER_US, launch_ts=ts + 14, tid=2)
            gpu += OTHER_US
            for i in range(events_per_layer):
                t.host("aten::view", ts + 20 + 4 * i, 3.5, tid=2)
            ts += 20 + host_us + 4 * events_per_layer
        t.host("cudaDeviceSynchronize", ts, max(gpu - ts, 0) + 2, cat="cuda_runtime")
        ts = max(ts, gpu) + 5
        step_event["dur"] = ts - start
        ts += 1
    return t


@pytest.mark.parametrize("replay", [False, True])
def test_fp32_simt_and_ffma_gemms_are_priced_as_their_tf32_rerun(tmp_path: Path, replay: bool) -> None:
    trace = write_h200(fp32_training_step(), tmp_path / "fp32_step.json")
    result = findings(trace, replay=replay)
    assert result.findings[0].id == "fp32_no_tensor_cores"
    f = by_id(result, "fp32_no_tensor_cores")
    assert "85 % of GPU kernel time" in f.title
    # per step: 12 GEMMs each rerun at TF32, out of a step the GPU fills
    saved_us = 2 * LAYERS * (GEMM_US - FLOPS / TF32_RATE * 1e6)
    step_us = 2 * LAYERS * (GEMM_US + OTHER_US)
    assert f.saving_pct == pytest.approx(100 * saved_us / step_us, rel=0.05)
    assert f.saving_pct > 50  # measured on such steps: TF32 more than halves them



def test_fp32_step_made_host_bound_by_the_profiler_is_priced_on_the_step_without_it(tmp_path: Path) -> None:
    """80 recorded ops per layer make the traced host the critical path (340 µs of host per
    layer against 253 µs of GPU): on the traced timeline faster GEMMs change nothing. Without
    the profiler's cost of those events (the window's estimate) the GPU sets the step again,
    and the TF32 rerun is priced as on the GPU-bound step."""
    trace = write_h200(fp32_training_step(steps=5, events_per_layer=80), tmp_path / "fp32_profiled.json")
    traced = by_id(findings(trace, replay=True), "fp32_no_tensor_cores")
    real = findings(trace, replay=True, clock=True)
    assert real.clock == "estimated" and real.step_ns is not None and real.traced_step_ns is not None
    assert real.step_ns < real.traced_step_ns
    f = by_id(real, "fp32_no_tensor_cores")
    assert f is not None and f.method.startswith("replayed")
    assert traced.saving_pct < 30 < f.saving_pct, (traced.saving_pct, f.saving_pct)
