"""Kernel name → family / subfamily / tensor-core classification, table-driven.

The names are real kernel names seen in PyTorch profiler traces (cuBLAS, CUTLASS, ATen,
Inductor, NCCL, flash attention) plus a few written by hand for families the samples lack.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

from traceinsight.analysis.classify.families import (
    FAMILIES,
    FAMILY_RULES,
    TENSOR_CORE_RULES,
    classify,
    classify_names,
    with_families,
)

# (name, family, subfamily, tensor_core)
CASES = [
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm", None, True),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm", None, True),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", "gemm", None, False),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)", "gemm", None, False),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2::Params)", "gemm", None, True),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", None, True),
    ("ampere_sgemm_128x64_nn", "gemm", None, False),
    ("volta_h884gemm_64x64_ldg8_nn", "gemm", None, True),
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas", "gemm", None, True),
    ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>(cublasGemmSmallNParams<float>)", "gemm", None, False),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, float, float, true, false, false, false>(cublasLt::cublasSplitKParams<float>)", "gemm", None, False),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn", "conv", None, True),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)", "conv", None, False),
    ("void at::native::conv_depthwise2d_forward_kernel<1, float, int>(at::GenericPackedTensorAccessor<float const, 4ul>)", "conv", None, False),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_fwd_params)", "attention", None, True),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention", None, True),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm75(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm75, true, 64, 64, 64, true, true>::Params)", "attention", None, False),
    ("triton_poi_fused_addmm_relu_threshold_backward_view_7", "triton", "pointwise", False),
    ("triton_red_fused_native_layer_norm_backward_view_4", "triton", "reduction", False),
    ("triton_per_fused__log_softmax_prepare_softmax_online_11", "triton", "persistent_reduction", False),
    ("triton_tem_fused_addmm_0", "triton", "template", True),
    ("triton_for_fused_0", "triton", "foreach", False),
    ("triton_xyz_fused_0", "triton", "other", False),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication", None, False),
    ("Memcpy HtoD (Pinned -> Device)", "memcpy", None, False),
    ("Memset (Device)", "memset", None, False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)", "elementwise", None, False),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<3>)", "elementwise", None, False),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)", "copy", None, False),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(at::TensorIteratorBase&)", "copy", None, False),
    ("void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)", "copy", None, False),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float>)", "reduction", None, False),
    ("void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 4, true, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)", "reduction", None, False),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*)", "reduction", None, False),
    ("my_custom_kernel", "other", None, False),
    ("", "other", None, False),
]


@pytest.mark.parametrize(("name", "family", "subfamily", "tensor_core"), CASES)
def test_classify_single_name(name: str, family: str, subfamily: str | None, tensor_core: bool) -> None:
    cls = classify(name)
    assert (cls.family, cls.subfamily, cls.tensor_core) == (family, subfamily, tensor_core)
    # The rule that decided is named exactly when tensor cores are claimed.
    assert (cls.tensor_core_rule is not None) == tensor_core


def test_vectorised_classification_matches_single_lookups() -> None:
    names = [c[0] for c in CASES]
    table = classify_names(names)
    assert table.height == len(set(names))
    by_name = {row["name"]: row for row in table.iter_rows(named=True)}
    for name, family, subfamily, tensor_core in CASES:
        row = by_name[name]
        assert (row["family"], row["subfamily"], row["tensor_core"]) == (family, subfamily, tensor_core)


def test_with_families_joins_back_on_categorical_names_and_keeps_rows() -> None:
    frame = pl.DataFrame(
        {"name": ["Memset (Device)", "triton_poi_fused_0", "Memset (Device)", None], "dur_ns": [1, 2, 3, 4]},
        schema={"name": pl.Categorical, "dur_ns": pl.Int64},
    )
    out = with_families(frame)
    assert out.height == 4
    assert out["dur_ns"].to_list() == [1, 2, 3, 4]
    assert out["family"].to_list() == ["memset", "triton", "memset", "other"]
    assert out["subfamily"].to_list() == [None, "pointwise", None, None]


def test_every_family_label_is_declared_and_patterns_compile_in_python_too() -> None:
    assert {family for family, _ in FAMILY_RULES} | {"other"} == set(FAMILIES)
    for _, pattern in (*FAMILY_RULES, *TENSOR_CORE_RULES):
        re.compile(pattern)
