"""The kernel classifier against a table of real kernel names with hand-written classes.

``tests/data/kernel_classes.csv`` holds every distinct device-event name of the sample traces
(H200) and of the third-party traces (A100, H100, MI210, MI300X, vLLM/SGLang/xDiT, MTIA), as
listed by ``tests/data/harvest_kernel_names.py``. Each row's family, precision, tensor-core use
and library were written by reading the name, not by running the classifier.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import polars as pl
import pytest

from traceinsight.analysis.classify import (
    COLUMNS,
    FAMILIES,
    PRECISIONS,
    RULES,
    KernelClass,
    classify,
    classify_names,
    with_classes,
)

TABLE = Path(__file__).parent.parent / "data" / "kernel_classes.csv"


def vendor_of(source: str) -> str:
    """The vendor of the device a source trace was recorded on."""
    if "mtia" in source:
        return "mtia"
    if source.startswith("sample_traces/") or source.startswith("third_party/hta/") or "h100" in source:
        return "nvidia"
    return "amd"  # the other tracelens traces: MI210, MI300X


def _rows() -> list[dict[str, str]]:
    with TABLE.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


ROWS = _rows()


def _tc(text: str) -> bool | None:
    return {"true": True, "false": False, "": None}[text]


def test_table_is_large_and_covers_every_vendor() -> None:
    assert len(ROWS) >= 400
    vendors = {vendor_of(r["source"]) for r in ROWS}
    assert vendors == {"nvidia", "amd", "mtia"}
    libraries = {r["library"] for r in ROWS}
    for lib in ("cublas", "nvjet", "cudnn", "flash_attn", "nccl", "rccl", "tensile", "hipblaslt",
                "composable_kernel", "miopen", "aiter", "inductor", "triton", "mtia"):
        assert lib in libraries, lib
    names = [r["name"] for r in ROWS]
    assert len(names) == len(set(names)), "one row per name"
    for r in ROWS:
        assert r["family"] in FAMILIES, r
        assert r["precision"] in PRECISIONS, r


def test_every_row_classifies_as_written() -> None:
    by_vendor: dict[str, list[dict[str, str]]] = {}
    for r in ROWS:
        by_vendor.setdefault(vendor_of(r["source"]), []).append(r)
    problems = []
    for vendor, rows in sorted(by_vendor.items()):
        got = classify_names([r["name"] for r in rows], vendor=vendor)
        got_by_name = {row["name"]: row for row in got.iter_rows(named=True)}
        for r in rows:
            g = got_by_name[r["name"]]
            want = (r["family"], r["precision"], _tc(r["tensor_core"]), r["library"])
            have = (g["family"], g["precision"], g["tensor_core"], g["library"])
            if want != have:
                fields = ("family", "precision", "tensor_core", "library")
                diff = ", ".join(
                    f"{f}: want {w!r} got {h!r}" for f, w, h in zip(fields, want, have, strict=False) if w != h
                )
                problems.append(f"[{r['source']}] {r['name'][:110]} (rule {g['rule']}): {diff}")
    assert not problems, f"{len(problems)} of {len(ROWS)} rows misclassified:\n" + "\n".join(problems)


def test_table_and_single_lookups_agree() -> None:
    for r in ROWS[::25]:
        vendor = vendor_of(r["source"])
        one = classify(r["name"], vendor=vendor)
        row = classify_names([r["name"]], vendor=vendor).row(0, named=True)
        assert one == KernelClass(**row)


# ---- edge cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "my_custom_kernel", "kernel", "void foo<int>(int)", "   "])
def test_unknown_names_are_other_and_unknown(name: str) -> None:
    k = classify(name)
    assert k.family == "other"
    assert k.precision in ("unknown", "int")  # an int template argument is still a fact
    assert k.rule == "none"
    assert k.library == "unknown"
    assert k.tensor_core is None


def test_unknown_name_says_unknown_precision() -> None:
    k = classify("my_custom_kernel")
    assert (k.family, k.precision, k.tensor_core) == ("other", "unknown", None)


def test_null_and_empty_names() -> None:
    frame = classify_names(pl.Series("name", [None, "", "Memset (Device)"], dtype=pl.String))
    assert frame.height == 2  # null counts as "" (one distinct name)
    assert frame["family"].to_list() == ["other", "memset"]
    assert classify(None).family == "other"


def test_batch_norm_with_gemm_in_name_is_normalization() -> None:
    # cuDNN's batch norm kernels live next to its GEMMs; a name with both hints is a norm.
    for name in (
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*, cudnn::gemm_params)",
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float, float, float, float, cudnnTensorStruct)",
        "bn_fw_inf_1C11_kernel_NCHW_gemm_epilogue",
    ):
        k = classify(name)
        assert k.family == "normalization", (name, k)
        assert k.tensor_core is False
    assert classify("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(x)").library == "cudnn"


def test_layout_kernels_are_copies_not_convolutions() -> None:
    k = classify("void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<float>, __half const*, __half*)")
    assert (k.family, k.subfamily, k.precision, k.library) == ("copy", "layout", "fp16", "cudnn")


@pytest.mark.parametrize(
    ("name", "family", "precision", "tensor_core", "library"),
    [
        # cuBLAS / cuBLASLt / CUTLASS / nvjet spellings the traces at hand lack
        ("volta_h884gemm_64x64_ldg8_nn", "gemm", "fp16", True, "cublas"),
        ("volta_sgemm_128x64_nn", "gemm", "fp32", False, "cublas"),
        ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", "gemm", "fp16", True, "cublas"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", "bf16", True, "cublas"),
        ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm", "fp8", True, "cublas"),
        ("nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTN", "gemm", "fp16", True, "nvjet"),
        ("nvjet_qqtst_128x256_128x6_2x1_v_bz_coopA_TNT", "gemm", "fp8", True, "nvjet"),
        ("void cutlass::device_kernel<cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma>(cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma::Params)", "gemm", "bf16", True, "cutlass"),
        ("void cutlass::device_kernel<cutlass3x_sm90_tensorop_s64x128x32gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_align16_warpspecialized_cooperative_fp8_fastaccum_epi_tma>(x)", "gemm", "fp8", True, "cutlass"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x3_nn_align8>(x)", "gemm", "fp16", True, "cublas"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_i16832gemm_s8_256x128_64x3_tn_align16>(x)", "gemm", "int8", True, "cublas"),
        # cuDNN convolutions
        ("sm80_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_execute_kernel__5x_cudnn", "conv_dgrad", "bf16", True, "cudnn"),
        ("sm80_xmma_wgrad_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_warpsize2x2x1_g1_tensor16x8x16_execute_kernel__5x_cudnn", "conv_wgrad", "fp16", True, "cudnn"),
        ("void cudnn::cnn::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)", "conv_fprop", "fp32", False, "cudnn"),
        ("void cudnn::engines_precompiled::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)", "conv_wgrad", "fp32", False, "cudnn"),
        # attention
        ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::half_t>, true, false, false, false, false, true, false, false>(Flash_bwd_params)", "attention_bwd", "fp16", True, "flash_attn"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", "attention_fwd", "unknown", True, "cudnn"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x64x128_4x1x1_kernel0_0", "attention_bwd", "unknown", True, "cudnn"),
        ("fmha_cutlassF_f32_aligned_64x64_rf_sm75(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm75, true, 64, 64, 64, true, true>::Params)", "attention_fwd", "fp32", False, "mem_eff_attention"),
        ("_ZN5aiter43fmha_fwd_hd128_bf16_causal_rtz_group_kernelE", "attention_fwd", "bf16", True, "aiter"),
        # communication
        ("void one_shot_all_reduce_kernel<c10::BFloat16, 8, true>(c10::BFloat16**, unsigned long, unsigned long, c10::BFloat16*, unsigned long, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)", "communication", "bf16", False, "symmetric_memory"),
        ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", "communication", "bf16", False, "custom_allreduce"),
        # AMD spellings
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1", "gemm", "fp16", True, "tensile"),
        ("Cijk_Ailk_Bljk_SB_MT64x64x16_SN_1LDSB0_APM1_ABV0", "gemm", "fp32", False, "tensile"),
        ("Cijk_Alik_Bljk_F8BS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_SN", "gemm", "fp8", True, "hipblaslt"),
        ("miopenSp3AsmConv_v30_3_1_gfx9_fp32_f2x3_stride1", "conv", "fp32", None, "miopen"),
        ("naive_conv_nonpacked_fwd_nchw_float_double_float", "conv_fprop", "fp32", False, "miopen"),
        ("naive_conv_nonpacked_bwd_nchw_half_double_half", "conv_dgrad", "fp16", False, "miopen"),
        ("naive_conv_nonpacked_wrw_nhwc_bfloat16_double_bfloat16", "conv_wgrad", "bf16", False, "miopen"),
        ("_ZN2ck27kernel_gemm_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_cshuffle_v3IDF16_DF16_fDF16_E", "gemm", "fp16", True, "composable_kernel"),
        ("Cijk_Ailk_Bljk_SS_BH_MT64x64x16_MI16x16x4x1_SN_1LDSB0", "gemm", "fp32", True, "tensile"),
        ("Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0_APM1", "gemm", "bf16", True, "tensile"),
        ("Cijk_Ailk_Bljk_XS_BH_Bias_HAS_SAV_UserArgs_MT128x128x32_MI32x32x4_SN", "gemm", "tf32", True, "hipblaslt"),
        ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, ck::half_t, ck::half_t, float>, true>(x)", "gemm", "fp16", True, "composable_kernel"),
        ("void aiter::fmha_fwd_kernel<ck_tile::FmhaFwdKernel<ck_tile::bf16_t>>(x)", "attention_fwd", "bf16", True, "aiter"),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", "bf16", False, "nccl"),
        ("void two_shot_all_reduce_kernel<float, 8>(float**, unsigned long, unsigned long, float*, unsigned long, unsigned int**, unsigned long, unsigned long)", "communication", "fp32", False, "symmetric_memory"),
        ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float>, float, float, float, float, float, float, adamMode_t, float>(long, int*, TensorListMetadata<4>&, AdamFunctor<float, float>)", "optimizer", "fp32", False, "unknown"),
        ("void at::native::(anonymous namespace)::fused_adam_kernel<float>(x)", "optimizer", "fp32", False, "aten"),
        ("void at::native::(anonymous namespace)::embedding_bag_kernel<float, long>(x)", "embedding", "fp32", False, "aten"),
        # Triton / Inductor
        ("triton_tem_fused_addmm_0", "gemm", "unknown", None, "inductor"),
        ("triton_mm", "gemm", "unknown", None, "inductor"),
        ("triton_for_fused_0", "elementwise", "unknown", False, "inductor"),
        # PyTorch optimizers and RNG
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedSgdMathFunctor<c10::BFloat16, 2>, double, double, double, bool, bool, bool, float const*, float const*>(x)", "optimizer", "bf16", False, "aten"),
        ("void at::native::(anonymous namespace)::embedding_backward_feature_kernel<float, float, long>(long const*, float const*, float*, int, long, int, int)", "embedding", "fp32", False, "aten"),
    ],
)
def test_hand_written_names(name: str, family: str, precision: str, tensor_core: bool | None, library: str) -> None:
    k = classify(name)
    assert (k.family, k.precision, k.tensor_core, k.library) == (family, precision, tensor_core, library), k


@pytest.mark.parametrize(
    ("name", "library", "collective"),
    [
        # c10d backends without kernels leave host spans (recorded gloo samples)
        ("gloo:all_reduce", "gloo", "allreduce"),
        ("gloo:broadcast", "gloo", "broadcast"),
        ("nccl:all_to_all", "nccl", "all_to_all"),
        ("nccl:_all_gather_base", "nccl", "allgather"),
        # torch symmetric memory (CUDASymmetricMemoryOps.cu, nvshmem all_to_all_vdev)
        ("allToAllV", "symmetric_memory", "all_to_all"),
        ("multimem_all_gather_kernel", "symmetric_memory", "allgather"),
        # quick all-reduce on ROCm (vLLM/SGLang through aiter), aiter's custom all-reduce
        ("quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half, CodecQ4<__half,4>, true>, __half>", "custom_allreduce", "allreduce"),
        ("aiter::cross_device_reduce_2stage", "custom_allreduce", "allreduce"),
    ],
)
def test_communication_names_and_their_collective(name: str, library: str, collective: str) -> None:
    k = classify(name)
    assert (k.family, k.library, k.collective) == ("communication", library, collective), k


def test_collectives_from_names_and_args() -> None:
    assert classify("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)").collective == "allgather"
    assert classify("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)").collective == "reduce_scatter"
    rs = classify("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    assert rs.precision == "bf16"
    assert classify("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)").collective == "broadcast"
    generic = "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"
    assert classify(generic).collective is None
    with_args = classify(generic, args={"Collective name": "allreduce", "dtype": "BFloat16"})
    assert (with_args.collective, with_args.precision) == ("allreduce", "bf16")
    assert with_args.rule.endswith("+args")
    assert classify(generic, vendor="amd").library == "rccl"
    assert classify(generic, vendor="nvidia").library == "nccl"


def test_args_fill_precision_only_where_the_name_is_silent() -> None:
    named = classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", args={"Input type": ["c10::BFloat16"]})
    assert named.precision == "fp32"
    silent = classify("triton_poi_fused_add_0", args={"Input type": ["c10::BFloat16", "c10::BFloat16"]})
    assert silent.precision == "bf16"


def test_memcpy_direction_and_mtia_events() -> None:
    assert classify("Memcpy HtoD (Pageable -> Device)").subfamily == "h2d"
    assert classify("Memcpy DtoH (Device -> Pinned)").subfamily == "d2h"
    # MTIA's device events have generic names: only an MTIA trace makes them MTIA work.
    assert classify("merge").library == "unknown"
    assert classify("merge", vendor="mtia").library == "mtia"
    assert classify("event_wait", vendor="mtia").family == "sync"


def test_xpu_names_need_the_intel_vendor() -> None:
    assert classify("gen_gemm_kernel_xe_hpc", vendor="intel").library == "onednn"
    assert classify("micro_sdpa", vendor="intel").family == "attention_fwd"
    assert classify("micro_sdpa").family == "other"
    xpu = classify("at::native::xpu::VectorizedElementwiseKernel<4, at::native::xpu::AddFunctor<float>, at::detail::Array<char*, 3>>", vendor="xpu")
    assert (xpu.family, xpu.precision, xpu.library) == ("elementwise", "fp32", "xpu")


def test_frame_api_and_columns() -> None:
    frame = pl.DataFrame({"name": ["triton_poi_fused_0", "triton_poi_fused_0", "ncclDevKernel_Generic(x)"], "collective_name": [None, None, "_allgather_base"]})
    out = with_classes(frame)
    assert out.height == 3
    assert out["family"].to_list() == ["elementwise", "elementwise", "communication"]
    assert out["collective"].to_list() == [None, None, "allgather"]
    assert dict(classify_names(["x"]).schema) == dict(COLUMNS)
    assert classify_names([]).height == 0


def test_rule_ids_are_unique_and_rules_compile() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    # every pattern must be accepted by polars' (Rust) regex engine
    pl.DataFrame({"n": ["x"]}).select([pl.col("n").str.contains(r.pattern).alias(r.id) for r in RULES])


def test_fast_on_many_unique_names() -> None:
    base = [r["name"] for r in ROWS]
    names = [f"{n}_{i}" if not n.startswith("Mem") else n for i in range(150) for n in base][:100_000]
    # CPU time (all threads), not wall time: the bound must hold on a busy machine too.
    start = time.process_time()
    out = classify_names(names)
    elapsed = time.process_time() - start
    assert out.height > 90_000
    assert elapsed < 3.0, f"{elapsed:.2f} s of CPU for {out.height} names"


def test_element_bytes_and_alignment() -> None:
    cat = classify("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 64, 64>(x)")
    assert (cat.precision, cat.element_bytes) == ("unknown", 2)
    assert classify("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<double>, std::array<char*, 3ul> >(int)").element_bytes == 8
    misaligned = classify("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2::Params)")
    assert (misaligned.alignment, misaligned.element_bytes) == (2, 2)
    xmma = classify("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas")
    assert xmma.alignment == 4
    assert classify("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN").alignment is None
    assert classify("triton_poi_fused_add_0").element_bytes is None
