"""Kernel name → family / subfamily / tensor-core use / library, table-driven, as the
analyses see them (the families every section, finding and cost reads).

The names are real kernel names seen in PyTorch profiler traces (cuBLAS, CUTLASS, ATen,
Inductor, NCCL, flash attention) plus a few written by hand. The classifier's own table of
694 names is ``tests/integration/test_kernel_classifier.py``; this file keeps the cases the earlier
name rules were checked on, with the families they have now: convolutions by direction,
attention forward/backward, Inductor's Triton kernels by what they compute (library
``inductor``), normalisation and softmax on their own.
"""

from __future__ import annotations

import polars as pl
import pytest

from traceinsight.analysis.classify import (
    FAMILIES,
    MATRIX_FAMILIES,
    classify,
    classify_names,
    with_classes,
)

# (name, family, subfamily, tensor_core (None: the name does not tell), library)
CASES = [
    ("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT", "gemm", None, True, "nvjet"),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "gemm",
        None,
        True,
        "cublas",
    ),
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "gemm",
        None,
        False,
        "cublas",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)",
        "gemm",
        None,
        False,
        "cublas",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_32x3_nn_align2::Params)",
        "gemm",
        None,
        True,
        "cublas",
    ),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", None, True, "cublas"),
    ("ampere_sgemm_128x64_nn", "gemm", None, False, "cublas"),
    ("volta_h884gemm_64x64_ldg8_nn", "gemm", None, True, "cublas"),
    (
        "sm80_xmma_gemm_tf32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas",
        "gemm",
        None,
        True,
        "cublas",
    ),
    (
        "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>>(cublasGemmSmallNParams<float>)",
        "gemm",
        "gemv_or_small",
        False,
        "cublas",
    ),
    (
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, float, float, float, true, false, false, false>(cublasLt::cublasSplitKParams<float>)",
        "gemm",
        "splitk_reduce",
        False,
        "cublaslt",
    ),
    (
        "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "conv_fprop",
        None,
        True,
        "cudnn",
    ),
    (
        "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
        "conv",
        "winograd",
        None,
        "cudnn",
    ),
    (
        "void at::native::conv_depthwise2d_forward_kernel<1, float, int>(at::GenericPackedTensorAccessor<float const, 4ul>)",
        "conv_fprop",
        None,
        None,
        "aten",
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(pytorch_flash::Flash_fwd_params)",
        "attention_fwd",
        None,
        True,
        "flash_attn",
    ),
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
        "attention_fwd",
        None,
        True,
        "mem_eff_attention",
    ),
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm75(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm75, true, 64, 64, 64, true, true>::Params)",
        "attention_fwd",
        None,
        False,
        "mem_eff_attention",
    ),
    (
        "triton_poi_fused_addmm_relu_threshold_backward_view_7",
        "elementwise",
        "pointwise",
        False,
        "inductor",
    ),
    (
        "triton_red_fused_native_layer_norm_backward_view_4",
        "reduction",
        "reduction",
        False,
        "inductor",
    ),
    (
        "triton_per_fused__log_softmax_prepare_softmax_online_11",
        "reduction",
        "persistent_reduction",
        False,
        "inductor",
    ),
    ("triton_tem_fused_addmm_0", "gemm", "template", None, "inductor"),
    ("triton_for_fused_0", "elementwise", "foreach", False, "inductor"),
    ("triton_xyz_fused_0", "other", None, None, "inductor"),
    (
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "communication",
        "allreduce",
        False,
        "nccl",
    ),
    ("Memcpy HtoD (Pinned -> Device)", "memcpy", "h2d", False, "runtime"),
    ("Memset (Device)", "memset", None, False, "runtime"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "elementwise",
        None,
        False,
        "aten",
    ),
    (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::PointwiseOpScalarFunctor<float, 3, 3, 0>, std::multiplies<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<3>)",
        "elementwise",
        "foreach",
        False,
        "aten",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)",
        "copy",
        "cast",
        False,
        "aten",
    ),
    (
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(at::TensorIteratorBase&)",
        "copy",
        "copy",
        False,
        "aten",
    ),
    (
        "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)",
        "copy",
        "gather_scatter",
        False,
        "aten",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float>)",
        "reduction",
        None,
        False,
        "aten",
    ),
    (
        "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 4, true, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
        "softmax",
        None,
        False,
        "aten",
    ),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*)",
        "normalization",
        "layer_norm",
        False,
        "aten",
    ),
    ("my_custom_kernel", "other", None, None, "unknown"),
    ("", "other", None, None, "unknown"),
]


@pytest.mark.parametrize(("name", "family", "subfamily", "tensor_core", "library"), CASES)
def test_classify_single_name(
    name: str, family: str, subfamily: str | None, tensor_core: bool | None, library: str
) -> None:
    cls = classify(name)
    assert (cls.family, cls.subfamily, cls.tensor_core, cls.library) == (
        family,
        subfamily,
        tensor_core,
        library,
    )
    assert cls.family in FAMILIES


def test_vectorised_classification_matches_single_lookups() -> None:
    names = [c[0] for c in CASES]
    table = classify_names(names)
    assert table.height == len(set(names))
    by_name = {row["name"]: row for row in table.iter_rows(named=True)}
    for name, family, subfamily, tensor_core, library in CASES:
        row = by_name[name]
        assert (row["family"], row["subfamily"], row["tensor_core"], row["library"]) == (
            family,
            subfamily,
            tensor_core,
            library,
        )


def test_with_classes_joins_back_on_categorical_names_and_keeps_rows() -> None:
    frame = pl.DataFrame(
        {
            "name": ["Memset (Device)", "triton_poi_fused_0", "Memset (Device)", None],
            "dur_ns": [1, 2, 3, 4],
        },
        schema={"name": pl.Categorical, "dur_ns": pl.Int64},
    )
    out = with_classes(frame)
    assert out.height == 4
    assert out["dur_ns"].to_list() == [1, 2, 3, 4]
    assert out["family"].to_list() == ["memset", "elementwise", "memset", "other"]
    assert out["subfamily"].to_list() == [None, "pointwise", None, None]
    assert out["library"].to_list() == ["runtime", "inductor", "runtime", "unknown"]


def test_matrix_families_are_the_gemm_conv_and_attention_ones() -> None:
    # "gemm, conv or attention" in the analyses means exactly these
    old_matrix = {"gemm", "conv", "attention"}
    for name, family, *_ in CASES:
        old = {
            "conv_fprop": "conv",
            "conv_dgrad": "conv",
            "conv_wgrad": "conv",
            "attention_fwd": "attention",
            "attention_bwd": "attention",
        }.get(family, family)
        assert (family in MATRIX_FAMILIES) == (
            old in old_matrix and not name.startswith("triton_")
        ) or name.startswith("triton_tem_")
    assert classify("triton_tem_fused_addmm_0").family in MATRIX_FAMILIES
