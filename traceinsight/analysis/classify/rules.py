"""The kernel classifier's rules, as data: which names mean what, per library and vendor.

A rule is a regular expression searched in the kernel name (Rust ``regex`` syntax, which
polars runs: no look-around, no back-references) and what a match means. Rules are tried in
the order of :data:`RULES`; the first one that matches decides. Order matters where a name
carries several hints: cuDNN's batch norm kernels live in the ``cudnn`` namespace, implicit-GEMM
convolutions contain ``gemm``, memory-efficient attention is built from CUTLASS. Specific
libraries come first, generic words (``gemm``, ``elementwise``, ``reduce``) last.

A rule fixes the family and, where the name cannot say otherwise, precision, tensor-core use
and library. Where the name says more, the rule names a *scheme* that reads it:

- precision schemes (:data:`PRECISION_SCHEMES`): how a library spells the data type
  (``xmma``: ``bf16bf16_bf16f32``; ``tensile``: the type letters after ``Cijk_Ailk_Bljk_``;
  ``template``: the first C++ type in the template arguments; ...);
- tensor-core schemes (:data:`TENSOR_CORE_SCHEMES`): the word that says which units ran
  (``tensorop``/``simt``, ``ffma``, ``MI32x32x8``, an MMA shape such as ``s1688``);
- ``"hint"`` as the library: the first of :data:`LIBRARY_HINTS` that matches the name.

Nothing here is a guess dressed as fact: a rule that cannot tell leaves the precision
``unknown`` and tensor-core use ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---- vocabularies ------------------------------------------------------------------------

FAMILIES = (
    "gemm",
    "conv_fprop",
    "conv_dgrad",
    "conv_wgrad",
    "conv",  # a convolution whose direction the name does not tell (FFT, Winograd parts)
    "attention_fwd",
    "attention_bwd",
    "normalization",
    "softmax",
    "elementwise",
    "reduction",
    "copy",  # layout changes, transposes, cat, gather/scatter, casts, KV-cache writes
    "embedding",
    "optimizer",
    "communication",
    "memcpy",
    "memset",
    "sort_scan",
    "rng",
    "sync",  # device-side event record / wait (MTIA)
    "other",
)
# Families whose kernels do matrix math (tensor/matrix cores possible).
MATRIX_FAMILIES = (
    "gemm",
    "conv_fprop",
    "conv_dgrad",
    "conv_wgrad",
    "conv",
    "attention_fwd",
    "attention_bwd",
)
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8", "int", "unknown")
COLLECTIVES = (
    "allreduce",
    "allgather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
VENDORS = ("nvidia", "amd", "intel", "mtia")


@dataclass(frozen=True)
class Rule:
    """One naming convention: ``pattern`` searched in the name, and what it means.

    ``precision`` and ``tensor_core`` are either a fixed answer or the name of a scheme
    (``"scheme:<name>"``); ``library`` is fixed or ``"hint"``. ``vendor`` restricts a rule
    to traces of that vendor (MTIA's device events have generic names such as ``merge``).
    """

    id: str
    pattern: str
    family: str
    library: str = "hint"
    precision: str = "scheme:template"
    tensor_core: bool | str | None = None
    subfamily: str | None = None
    vendor: str | None = None


def _r(
    id: str,
    pattern: str,
    family: str,
    library: str = "hint",
    precision: str = "scheme:template",
    tensor_core: bool | str | None = None,
    subfamily: str | None = None,
    vendor: str | None = None,
) -> Rule:
    return Rule(id, pattern, family, library, precision, tensor_core, subfamily, vendor)


_NONE = "unknown"

# ---- the rules, first match wins ---------------------------------------------------------

RULES: tuple[Rule, ...] = (
    # Copies and fills done by the copy engines / runtime (Kineto's gpu_memcpy / gpu_memset).
    _r("runtime.memcpy", r"^(?i:memcpy)\b", "memcpy", "runtime", _NONE, False, "scheme:memcpy"),
    _r("runtime.memset", r"^(?i:memset)\b", "memset", "runtime", _NONE, False),
    # MTIA device events (cat mtia_ccp_events): generic names, so only on MTIA traces.
    _r("mtia.dma", r"^dma_", "memcpy", "mtia", _NONE, False, "dma", vendor="mtia"),
    _r("mtia.event", r"^event_(?:record|wait)$", "sync", "mtia", _NONE, False, vendor="mtia"),
    _r("mtia.pe_exe", r"^pe_exe", "other", "mtia", _NONE, None, "pe_execution", vendor="mtia"),
    _r("mtia.any", r".", "other", "mtia", _NONE, None, vendor="mtia"),
    # ---- communication
    _r("nccl.kernel", r"nccl", "communication", "nccl", "scheme:nccl", False, "scheme:collective"),
    _r("rccl.kernel", r"(?i)rccl", "communication", "rccl", "scheme:nccl", False, "scheme:collective"),
    # gloo/MPI/UCC leave host spans, not kernels ("gloo:all_reduce"): communication all the same.
    _r("c10d.host_backend", r"^(?:gloo|mpi|ucc|xccl):\w+$", "communication", "scheme:hint", _NONE, False, "scheme:collective"),
    _r("symm_mem.allreduce", r"one_shot_all_reduce|two_shot_all_reduce|multimem_all_reduce|multimem_one_shot|multimem_all_gather|symm_mem|allToAllV|exchangeSplitAndOffset", "communication", "symmetric_memory", "scheme:template", False, "scheme:collective"),
    _r("custom_ar.vllm", r"cross_device_reduce|customAllReduce|custom_all_reduce|oneShotAllReduce|twoShotAllReduce|quickreduce|QuickReduce", "communication", "custom_allreduce", "scheme:template", False, "allreduce"),
    # ---- Inductor (torch.compile) Triton kernels: the prefix says the kind
    _r("inductor.pointwise", r"^triton_poi_", "elementwise", "inductor", _NONE, False, "pointwise"),
    _r("inductor.reduction", r"^triton_red_", "reduction", "inductor", _NONE, False, "reduction"),
    _r("inductor.persistent_reduction", r"^triton_per_", "reduction", "inductor", _NONE, False, "persistent_reduction"),
    _r("inductor.template", r"^triton_tem_", "gemm", "inductor", _NONE, None, "template"),
    _r("inductor.mm", r"^triton_(?:mm|bmm|addmm)(?:_|$)", "gemm", "inductor", _NONE, None, "template"),
    _r("inductor.foreach", r"^triton_for_", "elementwise", "inductor", _NONE, False, "foreach"),
    _r("inductor.scan", r"^triton_(?:spl|sca)_", "sort_scan", "inductor", _NONE, False, "scan"),
    _r("inductor.other", r"^triton_", "other", "inductor", _NONE, None),
    # ---- triton_kernels (MoE matmul, routing, top-k; used by vLLM/SGLang)
    _r("triton_kernels.matmul", r"^(?:_p)?_matmul_ogs", "gemm", "triton", "scheme:token", True),
    _r("triton_kernels.finalize", r"^_finalize_matmul", "reduction", "triton", "scheme:token", False, "moe_finalize"),
    _r("triton_kernels.topk", r"^_topk_(?:forward|backward)", "sort_scan", "triton", _NONE, False, "topk"),
    _r("triton_kernels.bitmatrix", r"^_sum_bitmatrix", "reduction", "triton", _NONE, False),
    _r("triton_kernels.routing", r"^_(?:combined_routing|routing_)", "other", "triton", _NONE, None, "moe_routing"),
    # ---- attention (before GEMM/CUTLASS: these kernels are built from them)
    _r("cudnn.sdpa_bwd", r"(?i)sdpa.*(?:bprop|bwd|backward|dgrad|dq|dkdv)", "attention_bwd", "cudnn", _NONE, True),
    _r("cudnn.sdpa_fwd", r"(?i)cudnn.*sdpa|sdpa.*cudnn|fort_native_sdpa", "attention_fwd", "cudnn", _NONE, True),
    _r("mem_eff.bwd", r"fmha_cutlassB|AttentionBackwardKernel", "attention_bwd", "mem_eff_attention", "scheme:token", "scheme:attention"),
    _r("mem_eff.fwd", r"fmha_cutlassF|PyTorchMemEffAttention|AttentionKernel<", "attention_fwd", "mem_eff_attention", "scheme:token", "scheme:attention"),
    _r("flash.bwd", r"(?i)flash.*bwd|bwd.*flash|flash.*backward", "attention_bwd", "flash_attn", "scheme:template", True),
    _r("flash.fwd", r"(?i)flash_fwd|flash::|pytorch_flash|flash_attn|FlashAttn", "attention_fwd", "flash_attn", "scheme:template", True),
    _r("aotriton.bwd", r"^(?:bwd_kernel_dk_dv|bwd_kernel_dq|bwd_preprocess|attn_bwd)", "attention_bwd", "aotriton", _NONE, True),
    _r("aotriton.fwd", r"^attn_fwd$", "attention_fwd", "aotriton", _NONE, True),
    _r("sage.fwd", r"^sage_fwd|sageattn|sage_attention", "attention_fwd", "sageattention", "int8", True),
    _r("kv_indices", r"create_flashinfer_kv_indices", "other", "triton", _NONE, False, "index"),
    _r("paged_attention.reduce", r"paged_attention\w*reduce", "attention_fwd", "hint", "scheme:template", False, "split_kv_reduce"),
    _r("paged_attention", r"(?i)paged_attention|unified_attention|decode_attention|prefill_attention|context_attention|BatchPrefill|BatchDecode|flashinfer", "attention_fwd", "hint", "scheme:template", True),
    _r("fmha.bwd", r"(?i)fmha_?bwd|fmha.*_bwd|mha_bwd|attention_?bwd|attn_?bwd|attention_backward", "attention_bwd", "hint", "scheme:token", True),
    _r("fmha.fwd", r"(?i)fmha|mha_fwd|_attn_fwd|attention_?fwd|attn_?fwd|xformers|efficient_attention", "attention_fwd", "hint", "scheme:token", True),
    # ---- normalization (before cuDNN/CUTLASS/GEMM: cudnn::bn_fw_* is not a GEMM)
    _r("norm.batch", r"(?i)\bbn_fw|\bbn_bw|::bn_|batch_?norm|BatchNorm|bn_fwd|bn_bwd", "normalization", "hint", "scheme:template", False, "batch_norm"),
    _r("norm.group", r"(?i)group_?norm|ComputeFusedParams|ComputeInternalGradients|ComputeBackwardFusedParams", "normalization", "hint", "scheme:template", False, "group_norm"),
    _r("norm.rms", r"(?i)rms_?norm", "normalization", "hint", "scheme:template", False, "rms_norm"),
    _r("norm.layer", r"(?i)layer_?norm|GammaBeta|RowwiseMoments|cuComputeGradGammaBeta|cuComputePartGradGammaBeta|cuApplyLayerNorm|instance_?norm", "normalization", "hint", "scheme:template", False, "layer_norm"),
    # ---- softmax
    _r("softmax", r"(?i)softmax", "softmax", "hint", "scheme:template", False),
    # ---- cuDNN / CUTLASS / cuBLAS convolutions and GEMMs
    _r("cudnn.layout", r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw", "copy", "cudnn", "scheme:template", False, "layout"),
    _r("xmma.fprop", r"xmma_fprop", "conv_fprop", "hint", "scheme:xmma", "scheme:xmma"),
    _r("xmma.dgrad", r"xmma_dgrad", "conv_dgrad", "hint", "scheme:xmma", "scheme:xmma"),
    _r("xmma.wgrad", r"xmma_wgrad", "conv_wgrad", "hint", "scheme:xmma", "scheme:xmma"),
    _r("xmma.gemm", r"xmma_gemm|xmma_.*gemm", "gemm", "hint", "scheme:xmma", "scheme:xmma"),
    _r("cutlass.fprop", r"cutlass\w*fprop", "conv_fprop", "hint", "scheme:cutlass", "scheme:cutlass"),
    _r("cutlass.dgrad", r"cutlass\w*dgrad", "conv_dgrad", "hint", "scheme:cutlass", "scheme:cutlass"),
    _r("cutlass.wgrad", r"cutlass\w*wgrad", "conv_wgrad", "hint", "scheme:cutlass", "scheme:cutlass"),
    _r("cutlass3.gemm", r"cutlass3x_sm\d+", "gemm", "cutlass", "scheme:cutlass", "scheme:cutlass"),
    # CUTLASS 2 kernels shipped inside cuBLAS: cutlass::Kernel2<cutlass_80_tensorop_...>.
    _r("cublas.cutlass", r"cutlass_\d+_(?:tensorop|simt|wmma)", "gemm", "cublas", "scheme:cutlass", "scheme:cutlass"),
    _r("cutlass.gemm", r"cutlass::gemm::kernel|cutlass::Kernel|cutlass_", "gemm", "cutlass", "scheme:template", "scheme:cutlass"),
    _r("nvjet.gemm", r"^nvjet_", "gemm", "nvjet", "scheme:nvjet", True),
    _r("cublaslt.splitk", r"splitKreduce", "gemm", "hint", "scheme:ftemplate", False, "splitk_reduce"),
    _r("cublaslt.epilogue", r"epilogue::impl::globalKernel|cublasLtEpilogue", "gemm", "cublaslt", "scheme:ftemplate", False, "epilogue"),
    _r("cublas.scal", r"\bscal_kernel<|\baxpy_kernel|\bnrm2_kernel|\basum_kernel", "elementwise", "cublas", "scheme:ftemplate", False),
    _r("cudnn.legacy_conv", r"^(?:cudnn_)?(?:maxwell|pascal|volta|turing|ampere|ada|hopper|sm\d+)_\w*cudnn", "conv_fprop", "cudnn", "scheme:legacy", "scheme:legacy"),
    _r("cudnn.fft", r"fft2d_r2c|fft2d_c2r|fft_?conv|flip_filter", "conv", "cudnn", "scheme:ftemplate", False, "fft"),
    _r("cudnn.winograd", r"(?i)winograd", "conv", "hint", "scheme:template", None, "winograd"),
    _r("cudnn.implicit_sgemm", r"implicit_convolve_[sdh]gemm|precomputed_convolve_[sdh]gemm|explicit_convolve_[sdh]gemm", "conv_fprop", "cudnn", "scheme:ftemplate", False),
    # cuDNN's own pre-tensor-core engines (CUDA-core loops; its tensor-core convolutions are the
    # xmma/cutlass/*884cudnn kernels above), the weight-gradient split reduction among them.
    _r("cudnn.wgrad_engine", r"wgrad_alg\d_engine|wgrad2d_|wgrad_engine|reduce_wgrad", "conv_wgrad", "cudnn", "scheme:ftemplate", False),
    _r("cudnn.dgrad_engine", r"dgrad_alg\d_engine|dgrad2d_|dgrad_engine|dgrad_1x1", "conv_dgrad", "cudnn", "scheme:ftemplate", False),
    _r("cudnn.helper", r"cask_cudnn::|computeOffsetsKernel", "other", "cudnn", _NONE, False),
    _r("cublas.legacy", r"^(?:maxwell|pascal|volta|turing|ampere|ada|hopper|sm\d+)_\w*gemm", "gemm", "cublas", "scheme:legacy", "scheme:legacy"),
    _r("cublas.gemv", r"gemv|gemmSN_|gemmk1_kernel|gemmSmall|sgemm_largek|dgemm_largek", "gemm", "cublas", "scheme:ftemplate", False, "gemv_or_small"),
    # ---- AMD: Tensile / hipBLASLt, Composable Kernel, MIOpen
    _r("tensile.gemm", r"^Cijk_", "gemm", "hint", "scheme:tensile", "scheme:tensile"),
    _r("hipblaslt.gemm", r"(?i)hipblaslt", "gemm", "hipblaslt", "scheme:token", None),
    _r("ck.conv_wgrad", r"(?i)(?:_ZN2ck|ck::|ck_tile).*(?:bwd_weight|BwdWeight)", "conv_wgrad", "composable_kernel", "scheme:ck", "scheme:ck"),
    _r("ck.conv_dgrad", r"(?i)(?:_ZN2ck|ck::|ck_tile).*(?:bwd_data|BwdData)", "conv_dgrad", "composable_kernel", "scheme:ck", "scheme:ck"),
    _r("ck.conv_fprop", r"(?i)(?:_ZN2ck|ck::|ck_tile).*conv.*fwd", "conv_fprop", "composable_kernel", "scheme:ck", "scheme:ck"),
    _r("ck.gemm", r"(?i)(?:_ZN2ck|ck::|ck_tile).*gemm|device_gemm|gridwise_gemm", "gemm", "composable_kernel", "scheme:ck", "scheme:ck"),
    _r("miopen.igemm_fwd", r"^igemm_fwd", "conv_fprop", "miopen", "scheme:token", "scheme:miopen"),
    _r("miopen.igemm_bwd", r"^igemm_bwd", "conv_dgrad", "miopen", "scheme:token", "scheme:miopen"),
    _r("miopen.igemm_wrw", r"^igemm_wrw", "conv_wgrad", "miopen", "scheme:token", "scheme:miopen"),
    _r("miopen.naive_dgrad", r"naive_conv\w*bwd", "conv_dgrad", "miopen", "scheme:token", False),
    _r("miopen.naive_wgrad", r"naive_conv\w*wrw", "conv_wgrad", "miopen", "scheme:token", False),
    _r("miopen.naive_fprop", r"naive_conv", "conv_fprop", "miopen", "scheme:token", False),
    _r("miopen.asm_conv", r"(?i)miopenSp3AsmConv|miopenGcnAsmConv|MIOpenConv|MIOpenCvD|gcnAsmConv", "conv", "miopen", "scheme:token", None),
    _r("miopen.transpose", r"^(?:batched_transpose_|transpose_(?:NCHW2CNHW|CNHW2NCHW)|general_4d_reorder)", "copy", "miopen", _NONE, False, "layout"),
    _r("miopen.im2col", r"^(?:Im2d2Col|Im3d2Col|Im2Col|Col2Im|im2col|col2im)", "copy", "miopen", _NONE, False, "im2col"),
    _r("miopen.tensor_op", r"^(?:SubTensorOp|MIOpenSetTensor|MIOpenScaleTensor|OpTensor|Op[1-5]dTensor|CastTensor)", "elementwise", "miopen", _NONE, False),
    # ---- Intel XPU (SYCL kernel names of torch-xpu-ops and oneDNN)
    _r("xpu.onednn_gemm", r"(?i)^gen_gemm|^xe_gemm|gemm_kernel_xe|ref_gemm", "gemm", "onednn", "scheme:token", None, vendor="intel"),
    _r("xpu.onednn_conv", r"(?i)^gen_conv|^xe_conv|ref_convolution", "conv_fprop", "onednn", "scheme:token", None, vendor="intel"),
    _r("xpu.sdpa", r"(?i)micro_sdpa|sdpa", "attention_fwd", "onednn", "scheme:token", True, vendor="intel"),
    # ---- embeddings (aten's embedding backward helpers, FBGEMM's table-batched embeddings)
    _r("rotary", r"(?i)rotary|\brope_|_rope_", "elementwise", "hint", "scheme:template", False, "rotary"),
    _r("embedding", r"(?i)embedding|compute_grad_weight|sum_and_scatter|krn_partials_per_segment|krn_partial_segment_offset|compute_num_of_partial_segments|bounds_check_indices|linearize_index_kernel", "embedding", "hint", "scheme:template", False),
    # ---- optimizers and foreach kernels
    _r("optimizer.fused", r"(?i)FusedAdam|fused_adam|FusedSGD|fused_sgd|FusedAdagrad|fused_adagrad|FusedLAMB|multi_tensor_adam|multi_tensor_sgd|multi_tensor_lamb|AdamFunctor|LAMBStage|FusedNovoGrad", "optimizer", "hint", "scheme:template", False, "fused"),
    _r("foreach.copy", r"multi_tensor_apply\w*<.*(?:Copy<|CopyFunctor)", "copy", "hint", "scheme:template", False, "foreach"),
    _r("foreach", r"multi_tensor_apply", "elementwise", "hint", "scheme:template", False, "foreach"),
    # ---- sort / scan / select primitives (CUB, rocPRIM, Thrust)
    _r("sort_scan", r"(?i)radix_?sort|RadixSort|DeviceScan|DeviceCompact|DeviceSelect|DeviceReduceByKey|unique_by_key|DeviceUnique|DeviceSegmentedSort|DeviceMergeSort|merge_sort|bitonic|sort_kernel|_topk|topk_|cumsum|cumprod|scan_kernel|rocprim::.*(?:scan|sort|select|unique)|DeviceHistogram", "sort_scan", "hint", "scheme:template", False),
    # ---- random numbers (dropout is elementwise work with RNG inside: elementwise)
    _r("dropout", r"(?i)dropout", "elementwise", "hint", "scheme:template", False, "dropout"),
    _r("rng", r"(?i)distribution_elementwise|philox|curand|normal_and_transform|uniform_and_transform|bernoulli|randperm|multinomial|random_kernel|random_from_to", "rng", "hint", "scheme:rng", False),
    # ---- copies and layout changes
    _r("copy.cat", r"CatArrayBatchedCopy|CatArray|cat_kernel|\bcat_", "copy", "hint", "scheme:template", False, "cat"),
    _r("copy.cast", r"bfloat16_copy_kernel|bfloat16tofloat32_copy|float32tobfloat16|_to_copy|convert_kernel", "copy", "hint", "scheme:wtemplate", False, "cast"),
    # Index-typed templates: vectorized_gather_kernel<16, long> moves 16-byte chunks; the
    # KV-cache writers' integer arguments are slot indices.
    _r("copy.gather_bytes", r"vectorized_gather_kernel", "copy", "hint", _NONE, False, "gather_scatter"),
    _r("copy.kv_cache", r"(?i)kv_?cache|reshape_and_cache", "copy", "hint", "scheme:ftemplate", False, "kv_cache"),
    _r("copy.gather_scatter", r"(?i)gather|scatter|index_select|indexSelect|index_elementwise|index_put|index_kernel|take_kernel|put_kernel|masked_select|masked_scatter|nonzero", "copy", "hint", "scheme:template", False, "gather_scatter"),
    _r("copy.repeat", r"repeat_interleave|^void compute_cuda_kernel<", "copy", "aten", "scheme:template", False, "repeat"),
    _r("copy.resample", r"(?i)upsample|interpolate|grid_sampler|resize", "copy", "hint", "scheme:template", False, "resample"),
    _r("copy.layout", r"(?i)transpose|permute|im2col|col2im|unfold|reflection_pad|replication_pad|constant_pad|flip_kernel|roll_kernel|contiguous", "copy", "hint", "scheme:template", False, "layout"),
    _r("copy.copy", r"(?i)copy_kernel|direct_copy|CopyFunctor|memcpy_kernel", "copy", "hint", "scheme:template", False, "copy"),
    # ---- quantization and FBGEMM helpers (before the generic rules: "fbgemm" contains "gemm")
    _r("quant", r"(?i)quantize|dequant|_quant_|quant_kernel|hfp8|fp8rowwise|FP8_qparam|_to_float_", "elementwise", "hint", "scheme:quant", False, "quantize"),
    _r("fbgemm.offsets", r"_offsets_range|asynchronous_complete_cumsum", "elementwise", "fbgemm", "scheme:template", False),
    # ---- generic matrix work the libraries above did not claim
    _r("generic.conv", r"(?i)convolution|conv[123]d|conv_?(?:fwd|fprop|forward)|implicit_?gemm|depthwise", "conv_fprop", "hint", "scheme:template", None),
    _r("generic.gemm", r"(?i)gemm|gemv|matmul|wgmma|mfma_gemm|\bbmm|_mm_", "gemm", "hint", "scheme:token", "scheme:generic_mma"),
    # ---- reductions, losses, pooling
    _r("pooling", r"(?i)max_pool|avg_pool|adaptive_avg|adaptive_average_pool|adaptive_max|MaxPool|AvgPool|pool2d|pool3d", "reduction", "hint", "scheme:template", False, "pooling"),
    _r("loss", r"(?i)nll_loss|cross_entropy|ctc_loss|kl_div|smooth_l1|multilabel_margin", "reduction", "hint", "scheme:template", False, "loss"),
    _r("reduce", r"(?i)reduce_kernel|ReduceOp|reduction|reduce_segments|_sum_bitmatrix|welford|argmax|argmin|norm_kernel|finalize_matmul_scatter|block_reduce|DeviceReduce|\breduce_", "reduction", "hint", "scheme:template", False),
    # ---- elementwise
    _r("sleep", r"spin_kernel|sleep_kernel|cuda_sleep|_sleep\b", "other", "hint", _NONE, False, "sleep"),
    _r("elementwise.fill", r"FillFunctor|fill_kernel", "elementwise", "hint", "scheme:template", False, "fill"),
    _r(
        "elementwise",
        r"(?i)elementwise|pointwise|Functor|_kernel_cuda|act_and_mul|silu|gelu|relu|swiglu|sigmoid|tanh|clamp|masked_fill|where_kernel|arange|_position_kernel|token_ids",
        "elementwise",
        "hint",
        "scheme:template",
        False,
    ),
)

# ---- library hints: the first pattern found in the name names the library -----------------

LIBRARY_HINTS: tuple[tuple[str, str], ...] = (
    (r"^gloo:", "gloo"),
    (r"^(?:mpi|ucc|xccl):", "c10d"),
    (r"aiter", "aiter"),
    (r"vllm|paged_attention_ll4mi", "vllm"),
    (r"ck_tile|_ZN2ck|ck::|\bck_", "composable_kernel"),
    (r"sgl_hip|sglang|sgl_kernel", "sglang"),
    (r"^sage_|sageattn", "sageattention"),
    (r"fbgemm|split_embedding|bounds_check_indices|linearize_index_kernel|permute_pooled_embs", "fbgemm"),
    (r"^Cijk_.*UserArgs", "hipblaslt"),
    (r"^Cijk_", "tensile"),
    (r"(?i)miopen|^igemm_|naive_conv|^batched_transpose|^transpose_(?:NCHW2CNHW|CNHW2NCHW)|^Im2d2Col|^SubTensorOp", "miopen"),
    (r"(?i)cudnn|cask_", "cudnn"),
    (r"cublasLt", "cublaslt"),
    (r"(?i)cublas|_5x_cublas", "cublas"),
    (r"at::native::xpu|\bxpu::", "xpu"),
    (r"(?i)^_?kernel_unified_attention|^_topk_forward|^_matmul_ogs|^_finalize_matmul|^_combined_routing|^_sum_bitmatrix|_triton$|^_attn_fwd|^_fwd_kernel|^_bwd_kernel", "triton"),
    (r"flashinfer", "flashinfer"),
    (r"apex|amp_C", "apex"),
    (r"at_cuda_detail::cub|\bcub::|thrust::", "cub"),
    (r"rocprim::|hipcub::", "rocprim"),
    (r"at::native|at::cuda|^void \(anonymous namespace\)::softmax_warp|elementwise_kernel_with_index", "aten"),
)

# ---- precision schemes: ordered (pattern, precision); first match wins -------------------

# cuBLAS/cuDNN "xmma" names spell input and compute types: gemm_<A><B>_<C><compute>_<acc>.
# The math type is what tensor cores ran: tf32 in "f32f32_tf32f32", bf16 in "bf16bf16_bf16f32".
_XMMA = (
    (r"e4m3|e5m2|fp8", "fp8"),
    (r"e2m1|fp4", "fp4"),
    (r"_bf16|bf16bf16", "bf16"),
    (r"_f16|f16f16|_fp16|_h16", "fp16"),
    (r"tf32", "tf32"),
    (r"_i8|i8i8|s8s8|int8|imma", "int8"),
    (r"f64|_d\d", "fp64"),
    (r"f32", "fp32"),
)
# CUTLASS 2/3 names: cutlass_80_tensorop_bf16_s16816gemm_bf16 (input bf16, fp32 accumulation,
# MMA 16x8x16); a tensorop "s1688gemm" with no input type is FP32 data on the TF32 MMA.
_CUTLASS = (
    (r"e4m3|e5m2|fp8|f8_", "fp8"),
    (r"e2m1|nvf4|mxf4|_f4_", "fp4"),
    (r"(?:_|^)bf16", "bf16"),
    (r"(?:_|^)f16|_h\d+gemm|tensorop_h\d|simt_hgemm|half_t", "fp16"),
    (r"tf32", "tf32"),
    (r"(?:_|^)(?:s8|i8|u8)|tensorop_i\d|_i\d+gemm|int8", "int8"),
    (r"tensorop_d\d|_d\d+gemm|simt_dgemm|f64|dgemm", "fp64"),
    (r"tensorop_s\d+gemm|tensorop_s\d+fprop|tensorop_s\d+dgrad|tensorop_s\d+wgrad|tensorop_\w*tf32", "tf32"),
    (r"simt_sgemm|sgemm|f32|simt_s", "fp32"),
)
# Legacy cuBLAS/cuDNN names: ampere_sgemm_*, volta_h884gemm_*, turing_fp16_s1688gemm_fp16_*,
# cudnn_ampere_scudnn_*: the letter before the (optional) MMA shape is the type.
_LEGACY = (
    (r"(?i)_fp16_|_fp16$|_h\d*(?:gemm|cudnn)|_hgemm|_h\d+gemm", "fp16"),
    (r"(?i)bf16", "bf16"),
    (r"(?i)tf32", "tf32"),
    (r"(?i)int8|_i\d+(?:gemm|cudnn)|imma|_igemm", "int8"),
    (r"(?i)_(?:d|z)\d*(?:gemm|cudnn)|_dgemm|_zgemm", "fp64"),
    (r"(?i)_(?:s|c|gc)\d*(?:gemm|cudnn)|_sgemm|_cgemm|_gcgemm|_scudnn", "fp32"),
)
# Tensile/hipBLASLt: Cijk_<A>_<B>_<types>_...; the first type letter(s) are the inputs:
# S fp32, D fp64, H fp16, B bf16, X xf32 (TF32 on gfx942), F8/B8 fp8, I8 int8, C/Z complex.
_TENSILE = (
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_(?:F8|B8|F8B8|B8F8|F8N|B8N)", "fp8"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_(?:F4|F6)", "fp4"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_I8", "int8"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_X", "tf32"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_H", "fp16"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_B", "bf16"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_[SC]", "fp32"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_[DZ]", "fp64"),
    (r"^Cijk_[A-Za-z]+_[A-Za-z]+_I", "int8"),
)
# cuBLAS nvjet kernels (Hopper, Blackwell): nvjet_[smXX_]<types>_...: the first letter(s) are
# the input type: t bf16, h fp16, q/e fp8 (e4m3/e5m2), o fp4. Others are left unknown.
_NVJET = (
    (r"^nvjet_(?:sm\d+_)?(?:q|e)", "fp8"),
    (r"^nvjet_(?:sm\d+_)?o", "fp4"),
    (r"^nvjet_(?:sm\d+_)?t", "bf16"),
    (r"^nvjet_(?:sm\d+_)?h", "fp16"),
)
# Composable Kernel names are mangled: DF16b is __bf16, DF16_ _Float16; CK's bhalf_t is an
# unsigned short ("t"), so a type run starting "tt" then float ("f") is bf16 data.
_CK = (
    (r"DF8_|DB8_|f8_t|f8_fnuz|bf8", "fp8"),
    (r"DF16b|bhalf|bf16", "bf16"),
    (r"DF16_|half_t|_Float16|f16", "fp16"),
    (r"ttft", "bf16"),
)
# Names without templates: the first type word, leftmost (bf16xbf16xmxfp4 is bf16 math).
_TOKEN_WORDS = (
    ("e4m3", "fp8"),
    ("e5m2", "fp8"),
    ("fp8", "fp8"),
    ("f8", "fp8"),
    ("mxfp4", "fp4"),
    ("nvfp4", "fp4"),
    ("fp4", "fp4"),
    ("e2m1", "fp4"),
    ("bf16", "bf16"),
    ("bfloat16", "bf16"),
    ("fp16", "fp16"),
    ("f16", "fp16"),
    ("half", "fp16"),
    ("tf32", "tf32"),
    ("xf32", "tf32"),
    ("fp64", "fp64"),
    ("f64", "fp64"),
    ("double", "fp64"),
    ("int8", "int8"),
    ("i8", "int8"),
    ("fp32", "fp32"),
    ("f32", "fp32"),
    ("float", "fp32"),
)
# C++ template arguments: the first type named is the element type of the data.
# (word, precision, whole word only); OpaqueType<N> is N bytes of any type: unknown.
_TEMPLATE_TYPES: tuple[tuple[str, str, bool], ...] = (
    *((w, "bf16", False) for w in ("c10::BFloat16", "__nv_bfloat16", "__hip_bfloat16", "hip_bfloat16", "::bfloat16", "DF16b", "__bf16")),
    *((w, "fp16", False) for w in ("c10::Half", "__half", "cutlass::half_t", "_Float16", "DF16_")),
    ("::Half", "fp16", True),
    *((w, "fp8", False) for w in ("c10::Float8", "__nv_fp8", "Float8_e4m3", "Float8_e5m2")),
    ("c10::complex<double>", "fp64", False),
    ("double", "fp64", True),
    ("c10::complex<float>", "fp32", False),
    ("float", "fp32", True),
    *((w, "int", True) for w in ("long", "int", "short", "char", "unsigned", "signed", "int8_t", "uint8_t", "int16_t", "int32_t", "int64_t", "uint32_t", "uint64_t")),
    ("OpaqueType", "unknown", False),
)
# A bool (a where() condition, a mask) only decides when no other type is named.
BOOL_TYPE = r"\bbool\b"
# The same without integer types, for libraries whose first template arguments are sizes or
# index types (cuBLAS gemv<int, int, float, ...>, splitKreduce_kernel<32, 16, int, bf16, ...>).
_FTEMPLATE_TYPES = tuple(t for t in _TEMPLATE_TYPES if t[1] != "int")
# NCCL kernel names carry the reduction's type: ..._Sum_bf16_RING_LL, ..._Sum_f32_...
_NCCL = (
    (r"_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_f8e4m3|_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_f8e5m2", "fp8"),
    (r"(?:AllReduce|ReduceScatter|Reduce)\w*_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_bf16", "bf16"),
    (r"(?:AllReduce|ReduceScatter|Reduce)\w*_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_(?:f16|half)", "fp16"),
    (r"(?:AllReduce|ReduceScatter|Reduce)\w*_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_(?:f32|float)", "fp32"),
    (r"(?:AllReduce|ReduceScatter|Reduce)\w*_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_(?:f64|double)", "fp64"),
    (r"(?:AllReduce|ReduceScatter|Reduce)\w*_(?:Sum|Prod|Max|Min|Avg|PreMulSum|SumPostDiv)_(?:i8|u8|i32|u32|i64|u64|int8_t|uint8_t|int32_t|uint32_t|int64_t|uint64_t)", "int"),
)
# Quantization kernels: the narrow type they write or read.
_QUANT = (
    (r"(?i)fp8|hfp8|e4m3|e5m2", "fp8"),
    (r"(?i)fp4|mxfp4|e2m1", "fp4"),
    (r"(?i)int8|i8", "int8"),
)

PRECISION_SCHEMES: dict[str, tuple[tuple[str, str], ...]] = {
    "xmma": _XMMA,
    "cutlass": _CUTLASS,
    "legacy": _LEGACY,
    "tensile": _TENSILE,
    "nvjet": _NVJET,
    "ck": _CK,
    "nccl": _NCCL,
    "quant": _QUANT,
}
# Schemes that take the leftmost of several alternatives (see kernels._leftmost).
LEFTMOST_SCHEMES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "template": _TEMPLATE_TYPES,
    "wtemplate": _TEMPLATE_TYPES,
    "ftemplate": _FTEMPLATE_TYPES,
}
TOKEN_WORDS = _TOKEN_WORDS

# ---- tensor-core schemes: ordered (pattern, answer); no match → the default -------------

TENSOR_CORE_SCHEMES: dict[str, tuple[tuple[tuple[str, bool], ...], bool | None]] = {
    # ffma/hfma/dfma = CUDA-core FMA; tensorNxMxK, warpgroup (wgmma) or a non-fp32 type = MMA.
    "xmma": (((r"ffma|hfma|dfma|simt", False),), True),
    "cutlass": (((r"simt", False), (r"tensorop|wmma|warpspecialized|tma", True)), None),
    # An MMA shape before gemm/cudnn (h884, s1688, s16816, i8816) means tensor cores.
    "legacy": (((r"_[a-z]*(?:884|1688|16816|8816|16832|3216)(?:gemm|cudnn)|hmma|imma|_fp16_s|bf16_s", True),), False),
    # Tensile: MI<M>x<N>x... = MFMA (matrix cores); MI0 or none = vector ALUs.
    "tensile": (((r"_MI0x|_MI0_", False), (r"_MI\d+x\d+", True)), False),
    # MIOpen's iGEMM: gtcx = xdlops (MFMA), gtc without x = vector.
    "miopen": (((r"_gtcx", True), (r"_gtc_", False)), None),
    # CK: xdl/xdlops/mfma/wmma pipelines run on matrix cores.
    "ck": (((r"(?i)xdl|mfma|wmma|Xdl", True), (r"(?i)dl_|dlops", False)), None),
    # Memory-efficient attention in FP32 before sm80 runs on CUDA cores (SIMT).
    "attention": (((r"(?i)_f32_.*_sm(?:50|60|61|70|75)", False),), True),
    "generic_mma": (((r"(?i)wgmma|hmma|imma|mfma|xdl|tensorop|tensor_?core|mma", True),), None),
}

# ---- sub-family schemes -----------------------------------------------------------------

# NCCL / custom collectives: the collective from the name (Generic kernels say none).
COLLECTIVE_NAMES: tuple[tuple[str, str], ...] = (
    (r"(?i)all_?reduce|allreduce|cross_device_reduce", "allreduce"),
    (r"(?i)all_?gather", "allgather"),
    (r"(?i)reduce_?scatter", "reduce_scatter"),
    (r"(?i)all_?to_?all", "all_to_all"),
    (r"(?i)broadcast", "broadcast"),
    (r"(?i)send_?recv|_send_|_recv_|SendRecv|_Send|_Recv", "send_recv"),
    (r"(?i)_reduce_|ncclDevKernel_Reduce|ncclKernel_Reduce", "reduce"),
)
# Kineto's memcpy names: "Memcpy HtoD (Pageable -> Device)".
MEMCPY_DIRECTIONS: tuple[tuple[str, str], ...] = (
    (r"HtoD", "h2d"),
    (r"DtoH", "d2h"),
    (r"DtoD", "d2d"),
    (r"PtoP", "p2p"),
    (r"HtoH", "h2h"),
)
# Collective names as torch / Kineto args spell them ("Collective name": "allreduce",
# "_allgather_base", "reduce_scatter_tensor_coalesced", "all_to_all", "send", "recv").
ARG_COLLECTIVES = (*COLLECTIVE_NAMES, (r"(?i)^send$|^recv$|isend|irecv", "send_recv"), (r"(?i)reduce", "reduce"))
# Data types as args spell them ("dtype": "BFloat16", "Input type": ["c10::BFloat16", ...]).
ARG_DTYPES: tuple[tuple[str, str], ...] = (
    (r"(?i)bfloat16|bf16", "bf16"),
    (r"(?i)float8|fp8|e4m3|e5m2", "fp8"),
    (r"(?i)\bhalf\b|float16|c10::Half|fp16", "fp16"),
    (r"(?i)double|float64", "fp64"),
    (r"(?i)^float$|float32|^c10::float|^fp32$", "fp32"),
)

# Bytes per element: ATen's cat/index kernels name an opaque type of N bytes; otherwise the
# precision's storage size (tf32 math reads fp32 data).
OPAQUE_BYTES = r"OpaqueType<([0-9]+)u?>"
PRECISION_BYTES: dict[str, int] = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
# Operand alignment in elements: CUTLASS "_align8", cuBLAS/cuDNN xmma "_aligna4_alignc4".
ALIGNMENT = r"_align[abc]?[0-9]+"
