"""Kernel name → family, subfamily and tensor-core use.

Everything here is a heuristic over the kernel's (demangled) name: CUDA does not tell the
profiler what a kernel computes or which units it used. The rules below follow the naming
conventions of cuBLAS/cuBLASLt (``sm80_xmma_gemm_*``, ``nvjet_*``, ``*_s16816gemm_*``),
CUTLASS (``cutlass_80_tensorop_*``, ``cutlass_80_simt_*``), cuDNN, flash/memory-efficient
attention, NCCL, PyTorch's ATen kernels and Inductor's Triton kernels
(``triton_{poi,red,per,tem,for}_fused_*``). A name nobody anticipated lands in ``other``.

Classification runs on the distinct names only (a few hundred even in huge traces) and is
joined back, so its cost does not grow with the number of kernel events.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

FAMILIES = (
    "gemm",
    "conv",
    "attention",
    "elementwise",
    "reduction",
    "copy",
    "triton",
    "communication",
    "memcpy",
    "memset",
    "other",
)

# (family, regex) in priority order: the first match wins. Order matters where names carry
# several hints: cuDNN's implicit-GEMM convolutions contain "gemm", Inductor fuses reductions
# into names containing "softmax", ATen's copy kernels run on the elementwise template.
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    ("memcpy", r"^(?i:memcpy)"),
    ("memset", r"^(?i:memset)"),
    ("communication", r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv|cross_device_reduce"),
    ("triton", r"^triton_"),
    ("attention", r"(?i)flash|fmha|attention|_mha_|^mha_|sdpa|xformers"),
    ("conv", r"(?i)convolution|conv[0-9_t]|_conv|depthwise|implicit_?gemm|winograd|fprop|dgrad|wgrad|cudnn|im2col|col2im"),
    (
        "gemm",
        r"(?i)gemm|gemv|nvjet|cublas|matmul|hmma|imma|wgmma|xmma|cutlass|_mm_|dot_kernel|bmm_",
    ),
    (
        "copy",
        r"(?i)copy|CatArray|cat_kernel|transpose|permute|gather|scatter|index_select|indexSelect|"
        r"index_kernel|repeat_interleave|flip_kernel|roll_kernel|_to_copy",
    ),
    (
        "reduction",
        r"(?i)reduce|reduction|softmax|norm_kernel|layer_norm|batch_norm|group_norm|rms_?norm|"
        r"GammaBeta|embedding_backward|cunn_|nll_loss|cross_entropy|argmax|argmin|cumsum|cumprod|scan|topk|sort|radix|"
        r"histogram|bincount|welford|moments",
    ),
    (
        "elementwise",
        r"(?i)elementwise|pointwise|multi_tensor_apply|foreach|fill_kernel|FillFunctor|Functor|"
        r"where_kernel|clamp|dropout|fused_adam|fused_sgd|masked_fill|arange|random|uniform|normal_kernel",
    ),
)

# Inductor prefixes: triton_<kind>_fused_... (also plain triton_<kind>_...).
TRITON_SUBFAMILIES = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent_reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split_scan",
    "sca": "scan",
}

# Names that say "no tensor cores" outright: FP32 FMA (SIMT) paths and small-matrix fallbacks.
_NOT_TENSOR_CORE = r"(?i)ffma|simt|gemmSN|gemv|dgemm|splitKreduce|(^|_)sgemm|^ampere_sgemm|^volta_sgemm"
# Ordered (rule, regex) pairs; the rule's label is kept so a reader can see why.
TENSOR_CORE_RULES: tuple[tuple[str, str], ...] = (
    ("mma-instruction", r"(?i)hmma|imma|wgmma|gmma|xmma"),
    ("cublas-nvjet", r"^nvjet"),
    ("tensorop", r"(?i)tensorop|tensor_op"),
    ("mma-shape", r"(?i)(^|_)[hsi](884|1688|16816|8816|16832)gemm"),
    ("inductor-template", r"^triton_tem_"),
    ("attention", r"(?i)flash|fmha|attention"),
    ("dtype", r"(?i)tf32|bf16|bfloat16|f16|fp16|half|e4m3|e5m2|fp8|int8|i8i8"),
)
# The dtype hint counts only for matrix kernels: "bfloat16_copy_kernel" is no tensor-core user.
_DTYPE_FAMILIES = ("gemm", "conv", "attention")
# FP32 attention on pre-Ampere parts runs on CUDA cores.
_ATTENTION_SIMT = r"(?i)(fmha|attention).*_f32_.*_sm(50|60|61|70|75)"


@dataclass(frozen=True)
class KernelClass:
    family: str
    subfamily: str | None
    tensor_core: bool
    tensor_core_rule: str | None


def _first_match(name: pl.Expr, rules: tuple[tuple[str, str], ...], family: pl.Expr | None = None) -> pl.Expr:
    """The label of the first rule whose pattern matches (null when none does)."""
    labels = []
    for label, pattern in rules:
        cond = name.str.contains(pattern)
        if label == "dtype" and family is not None:
            cond = cond & family.is_in(list(_DTYPE_FAMILIES))
        labels.append(pl.when(cond).then(pl.lit(label)))
    return pl.coalesce(labels)


def _subfamily_expr(name: pl.Expr, family: pl.Expr) -> pl.Expr:
    prefix = name.str.extract(r"^triton_([a-z]+)_", 1)
    sub = prefix.replace_strict(TRITON_SUBFAMILIES, default="other", return_dtype=pl.String)
    return pl.when(family == "triton").then(sub).otherwise(pl.lit(None, dtype=pl.String))


def _tensor_core_rule_expr(name: pl.Expr, family: pl.Expr) -> pl.Expr:
    negative = name.str.contains(_NOT_TENSOR_CORE) | name.str.contains(_ATTENTION_SIMT)
    return pl.when(~negative).then(_first_match(name, TENSOR_CORE_RULES, family))


def classify_names(names: pl.Series | list[str]) -> pl.DataFrame:
    """One row per distinct name: name (String), family, subfamily, tensor_core, tensor_core_rule."""
    series = pl.Series("name", names, dtype=pl.String) if isinstance(names, list) else names.cast(pl.String)
    frame = pl.DataFrame({"name": series.fill_null("")}).unique(maintain_order=True)
    name = pl.col("name")
    return (
        frame.with_columns(family=_first_match(name, FAMILY_RULES).fill_null("other"))
        .with_columns(
            subfamily=_subfamily_expr(name, pl.col("family")),
            tensor_core_rule=_tensor_core_rule_expr(name, pl.col("family")),
        )
        .with_columns(tensor_core=pl.col("tensor_core_rule").is_not_null())
        .select("name", "family", "subfamily", "tensor_core", "tensor_core_rule")
    )


def with_families(frame: pl.DataFrame, name_col: str = "name") -> pl.DataFrame:
    """``frame`` plus family, subfamily, tensor_core and tensor_core_rule, by its name column.

    Works on the distinct names only and joins the answer back, so it stays cheap on large
    frames; a Categorical name column is fine.
    """
    table = classify_names(frame[name_col].unique()).rename({"name": "_kname"})
    return (
        frame.with_columns(pl.col(name_col).cast(pl.String).fill_null("").alias("_kname"))
        .join(table, on="_kname", how="left")
        .drop("_kname")
    )


def classify(name: str) -> KernelClass:
    """The class of one kernel name (for single look-ups; use :func:`classify_names` on columns)."""
    row = classify_names([name]).row(0, named=True)
    return KernelClass(
        family=row["family"],
        subfamily=row["subfamily"],
        tensor_core=bool(row["tensor_core"]),
        tensor_core_rule=row["tensor_core_rule"],
    )
