"""Findings and fix texts that follow what the device and the kernels are: the device model
(V100, H200, MI300X, MTIA, unknown) and the kernel classifier (split-K helpers, cuDNN batch
norm, layout transforms, fused optimizers, GEMVs), on hand-made traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.findings_helpers import by_id, findings, ids, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.findings.detect.precision import misaligned_dims
from traceinsight.analysis.findings.verdict.headline import _bound_clause
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

SGEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)"
VOLTA_SGEMM = "volta_sgemm_128x64_nn"
BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int)"

V100 = {"id": 0, "name": "Tesla V100-SXM2-16GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80, "totalGlobalMem": 16 * 2**30}
MI300X = {"id": 0, "name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "gcnArchName": "gfx942:sramecc+:xnack-", "numSms": 304}
MTIA = {"id": 0, "name": "ARTEMIS"}
MYSTERY = {"id": 0, "name": "Mystery Accelerator 9000"}


def write_on(t: HandMadeTrace, path: Path, props: dict[str, Any]) -> Trace:
    """A hand-made trace on the device these deviceProperties describe."""
    doc = {"schemaVersion": 1, "deviceProperties": [props], "baseTimeNanoseconds": t.base_ns, "traceEvents": t.events}
    path.write_text(json.dumps(doc))
    return load(path, cache=False)


def gemm_trace(kernels: list[tuple[str, float]], dims: list[list[int]], types: list[str], *, op: str = "aten::mm", repeat: int = 1) -> HandMadeTrace:
    """Hand-made: ``repeat`` calls of ``op`` with these shapes, each running ``kernels`` (name, µs)."""
    t = HandMadeTrace()
    per_call = sum(d for _, d in kernels) + 20 * len(kernels)
    t.step(1, 0, 200 + repeat * per_call)
    ts = 20.0
    for _ in range(repeat):
        t.host(op, ts - 10, 8, args={"Input Dims": dims, "Input type": types})
        for name, dur in kernels:
            t.gpu(name, ts, dur, launch_ts=ts - 9)
            ts += dur + 20
    return t


# ---- fp32 without tensor cores: the fix and the peak follow the device -----------------


def test_fp32_gemm_on_v100_advises_fp16_autocast_with_its_peak(tmp_path: Path) -> None:
    t = gemm_trace([(VOLTA_SGEMM, 2_800)], [[4096, 4096], [4096, 4096]], ["float", "float"])
    f = by_id(findings(write_on(t, tmp_path / "v100.json", V100)), "fp32_no_tensor_cores")
    assert f is not None
    # Volta has fp16 tensor cores only: no TF32, no bf16 in the advice
    assert "GradScaler" in f.fix and "float16" in f.fix
    assert "set_float32_matmul_precision" not in f.fix and "bfloat16" not in f.fix
    # The V100 is in the peak table: the saving is priced at its fp16 peak, never "unknown"
    assert "unknown" not in f.confidence_reason
    assert "fp16 tensor-core peak (125 TFLOP/s)" in f.method
    assert f.action == "fp16 autocast with a GradScaler"


def test_fp32_gemm_on_h200_advises_tf32_or_bf16(tmp_path: Path) -> None:
    t = gemm_trace([(SGEMM, 2_800)], [[4096, 4096], [4096, 4096]], ["float", "float"])
    f = by_id(findings(write_h200(t, tmp_path / "h200.json")), "fp32_no_tensor_cores")
    assert "set_float32_matmul_precision('high')" in f.fix and "bfloat16" in f.fix
    assert "TF32 tensor-core peak" in f.method


def test_fp32_gemm_on_mi300x_advises_bf16(tmp_path: Path) -> None:
    t = gemm_trace([(SGEMM, 2_800)], [[4096, 4096], [4096, 4096]], ["float", "float"])
    f = by_id(findings(write_on(t, tmp_path / "mi300x.json", MI300X)), "fp32_no_tensor_cores")
    assert f is not None
    assert "bfloat16" in f.fix and "ROCm" in f.fix
    assert "set_float32_matmul_precision" not in f.fix
    assert "bf16 tensor-core peak" in f.method


def test_fp32_gemm_on_an_unknown_device_gives_no_peak_figure(tmp_path: Path) -> None:
    # (a kernel built for sm_80 would tell an NVIDIA Ampere-or-later part: this one names no SM)
    small_n = "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>(cublasGemmSmallNParams<float>)"
    t = gemm_trace([(small_n, 2_800)], [[4096, 4096], [4096, 4096]], ["float", "float"])
    f = by_id(findings(write_on(t, tmp_path / "mystery.json", MYSTERY)), "fp32_no_tensor_cores")
    assert f is not None
    assert f.confidence == "low" and "device peaks unknown" in f.confidence_reason
    assert "TFLOP/s" not in f.method and "not recognised" in f.fix


def test_split_k_reduce_batch_norm_and_layout_kernels_are_no_fp32_gemms(tmp_path: Path) -> None:
    # cuBLASLt's split-K reduction and epilogue, cuDNN's batch norm and its layout transform
    # all name float and no tensor cores; none of them is a GEMM that TF32 would speed up.
    helpers = [
        ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, float, float, true, false, false, false>(x)", 900.0),
        ("void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*)", 900.0),
        ("bn_fw_tr_1C11_kernel_NCHW", 900.0),
        ("bn_bw_1C11_kernel_new", 900.0),
        ("void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)2>(int, int, int, int, float const*, float*, float, float)", 900.0),
    ]
    t = gemm_trace(helpers, [[4096, 4096], [4096, 4096]], ["float", "float"], repeat=4)
    assert "fp32_no_tensor_cores" not in ids(findings(write_h200(t, tmp_path / "helpers.json")), material_only=False)


def test_unknown_tensor_core_use_counts_as_neither(tmp_path: Path) -> None:
    # An Inductor template GEMM does not say which units it used: no fp32 finding from it.
    t = gemm_trace([("triton_tem_fused_mm_0", 2_800)], [[4096, 4096], [4096, 4096]], ["float", "float"])
    assert "fp32_no_tensor_cores" not in ids(findings(write_h200(t, tmp_path / "tem.json")), material_only=False)


# ---- misaligned GEMMs ------------------------------------------------------------------


def test_batch_one_gemv_is_not_misaligned(tmp_path: Path) -> None:
    # Decode at batch 1: addmm [[1,4096],[4096,1024]] is a matrix-vector product; no padding helps.
    t = gemm_trace([(BF16_GEMM, 30)], [[1024], [1, 4096], [4096, 1024]], ["c10::BFloat16"] * 3, op="aten::addmm", repeat=40)
    assert "gemm_misaligned" not in ids(findings(write_h200(t, tmp_path / "gemv.json")), material_only=False)


def test_misaligned_vocabulary_gets_a_pad_to_64_fix_and_only_misaligned_ops_as_evidence(tmp_path: Path) -> None:
    t = gemm_trace([(BF16_GEMM, 900)], [[8192, 4096], [4096, 50257]], ["c10::BFloat16"] * 2, repeat=4)
    aligned_conv = [[32, 64, 56, 56], [64, 64, 3, 3]]
    ts = 20.0 + 4 * 920
    t.host("aten::convolution_backward", ts, 8, args={"Input Dims": [[32, 64, 56, 56], *aligned_conv], "Input type": ["c10::BFloat16"] * 3})
    t.gpu("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_kernel__5x_cudnn", ts + 10, 900, launch_ts=ts + 1)
    t.events[0]["dur"] = ts + 2_000  # the step spans the convolution too
    f = by_id(findings(write_h200(t, tmp_path / "vocab.json")), "gemm_misaligned")
    assert f is not None
    assert "50257 → 50304" in f.fix
    assert [o.name for o in f.evidence.ops] == ["aten::mm"]


def test_misaligned_dims_of_matmuls_and_convolutions() -> None:
    assert misaligned_dims("aten::addmm", "[[1024],[1,4096],[4096,1024]]", 8) == []
    assert misaligned_dims("aten::mm", "[[8192,4096],[4096,50257]]", 8) == [50257]
    # rows (batch x sequence: 788 ViT tokens) only round the tile count: not misaligned
    assert misaligned_dims("aten::addmm", "[[768],[788,768],[768,768]]", 8) == []
    assert misaligned_dims("aten::bmm", "[[2048,606,160],[2048,160,20]]", 4) == []
    assert misaligned_dims("aten::mm", "[[64,4095],[4095,1]]", 8) == [4095]
    # spatial sizes (56, 3) do not decide a convolution's path; its channels do
    assert misaligned_dims("aten::convolution_backward", "[[32,64,56,56],[32,64,56,56],[64,64,3,3]]", 8) == []
    assert misaligned_dims("aten::convolution", "[[32,3,224,224],[64,3,7,7]]", 8) == [3, 3]


# ---- the optimizer ---------------------------------------------------------------------


def optimizer_trace(kernel_name: str, n: int = 40, op: str = "aten::_foreach_mul_") -> HandMadeTrace:
    t = HandMadeTrace()
    t.step(1, 0, 2_000 + n * 150)
    t.host("aten::add", 5, 3)
    t.gpu(ADD, 10, 1_000, launch_ts=6)
    t.host("Optimizer.step#AdamW.step", 1_000, n * 150 + 100, cat="user_annotation")
    ts = 1_100.0
    for _ in range(n):
        t.host(op, ts - 30, 20)
        t.gpu(kernel_name, ts, 100, launch_ts=ts - 25)
        ts += 150
    return t


FOREACH = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 3, 2, 0>, std::plus<float>, float>(x)"
APEX_ADAM = "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>(int, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float)"
PER_PARAM = "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int)"


def test_an_already_fused_optimizer_is_never_told_to_fuse(tmp_path: Path) -> None:
    # apex's FusedAdam runs as multi_tensor_apply kernels of AdamFunctor: already fused
    result = findings(write_h200(optimizer_trace(APEX_ADAM), tmp_path / "apex.json"))
    assert by_id(result, "unfused_optimizer") is None
    # the same step on foreach kernels is told to fuse (the pair the detector exists for)
    result = findings(write_h200(optimizer_trace(FOREACH), tmp_path / "foreach.json"))
    assert "fused=True" in by_id(result, "unfused_optimizer").fix


def test_no_fused_true_advice_on_mtia(tmp_path: Path) -> None:
    result = findings(write_on(optimizer_trace(PER_PARAM, op="aten::mul_"), tmp_path / "mtia_opt.json", MTIA))
    f = by_id(result, "unfused_optimizer")
    assert f is not None and "fused=True" not in f.fix and "foreach=True" in f.fix
    # foreach already and no fused implementation known there: nothing left to advise
    result = findings(write_on(optimizer_trace(FOREACH), tmp_path / "mtia_foreach.json", MTIA))
    assert by_id(result, "unfused_optimizer") is None


# ---- launch-bound fix, headline roofline -------------------------------------------------


def launch_trace() -> HandMadeTrace:
    t = HandMadeTrace()
    t.step(1, 0, 4_000)
    ts = 10.0
    for _ in range(200):
        t.host("aten::add", ts, 15)
        t.gpu(ADD, ts + 16, 2, launch_ts=ts + 2, launch_dur=12)
        ts += 19
    return t


def test_launch_bound_fix_names_hip_graphs_on_rocm(tmp_path: Path) -> None:
    f = by_id(findings(write_on(launch_trace(), tmp_path / "rocm.json", MI300X)), "launch_bound")
    assert f is not None and "HIP graphs" in f.fix and "CUDA graphs" not in f.fix
    f = by_id(findings(write_h200(launch_trace(), tmp_path / "cuda.json")), "launch_bound")
    assert "CUDA graphs" in f.fix


def test_headline_quotes_no_roofline_share_where_none_is_known() -> None:
    regions = pl.DataFrame(
        {"kind": ["annotation"], "label": ["compute"], "name": ["forward"], "kernel_ns": [900], "pct_of_roofline": [None]},
        schema_overrides={"pct_of_roofline": pl.Float64},
    )
    clause = _bound_clause(BoundResult(regions=regions), 1_000)
    assert clause is not None and "compute-bound" in clause.text and "roofline" not in clause.text
    known = regions.with_columns(pct_of_roofline=pl.lit(40.0))
    assert "at 40 % of roofline" in (_bound_clause(BoundResult(regions=known), 1_000) or clause).text


def test_an_optimizer_without_a_fused_version_is_not_told_fused_true(tmp_path: Path) -> None:
    t = optimizer_trace(FOREACH)
    for e in t.events:
        if e["name"] == "Optimizer.step#AdamW.step":
            e["name"] = "Optimizer.step#Shampoo.step"
    f = by_id(findings(write_h200(t, tmp_path / "shampoo.json")), "unfused_optimizer")
    assert f is not None and "fused=True" not in f.fix and "Shampoo" in f.fix


def test_the_optimizer_is_not_charged_for_idle_that_waits_on_queued_work(tmp_path: Path) -> None:
    # Hand-made: the foreach step, and the same step whose second half waits 2 ms on work queued
    # elsewhere (its kernels launched on time, started 2 ms late: a device-side wait, as for a
    # gradient all-reduce on another stream). Fusing the optimizer does not remove that wait.
    def trace(wait_us: float) -> HandMadeTrace:
        t = HandMadeTrace()
        t.step(1, 0, 2_000 + 40 * 150 + wait_us)
        t.host("aten::add", 5, 3)
        t.gpu(ADD, 10, 1_000, launch_ts=6)
        t.host("Optimizer.step#AdamW.step", 1_000, 40 * 150 + 100, cat="user_annotation")
        ts = 1_100.0
        for i in range(40):
            t.host("aten::_foreach_mul_", ts - 30, 20)
            late = wait_us if i >= 20 else 0.0
            # the late ones were queued before the GPU ran out of work: launched 120 µs early
            t.gpu(FOREACH, ts + late, 100, launch_ts=ts - (120 if late else 25))
            ts += 150
        return t

    plain = by_id(findings(write_h200(trace(0.0), tmp_path / "plain.json")), "unfused_optimizer")
    waits = by_id(findings(write_h200(trace(2_000.0), tmp_path / "waits.json")), "unfused_optimizer")
    assert plain is not None and waits is not None
    # neither the 2 ms wait nor the 20 gaps of 50 µs between the queued kernels are claimed
    # (in the plain step those 50 µs are launch latency, which fusing does remove)
    assert waits.estimate_ns == pytest.approx(plain.estimate_ns - 1_000_000, abs=20_000)
