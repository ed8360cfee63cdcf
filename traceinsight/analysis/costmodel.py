"""FLOPs and bytes moved by aten ops, from the shapes and dtypes the profiler recorded.

Needs ``record_shapes=True``: Kineto then writes each op's ``Input Dims``, ``Input type``
and ``Concrete Inputs`` (kept as raw JSON text in the ``input_dims``, ``input_types`` and
``concrete_inputs`` columns). Conventions, chosen to match ``torch.utils.flop_counter``
where it counts an op at all:

- a multiply-add is 2 FLOPs; matmul-like ops count only their products (bias adds and
  alpha/beta scaling are left out, as flop_counter does);
- attention counts the two matmuls (QKᵀ and PV); a causal mask halves them (flop_counter
  does not halve, so causal ratios against it read 0.5); backward counts twice forward;
- convolution backward counts one forward-sized product per gradient it computes;
- elementwise ops count one FLOP per output element per arithmetic step, reductions one
  per input element, normalisations and softmax a small fixed number per element;
- bytes are the ideal traffic: every input read once and every output written once
  (caches, re-reads and tiling are ignored), so achieved bandwidth is a lower bound.

Shapes are parsed once per distinct (name, dims, types, concrete inputs) combination, which
stays small even in very large traces, and the costs are joined back to the ops.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

# Bytes per element by Kineto's "Input type" string.
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "double": 8,
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "long int": 8,
    "long": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::Half>": 4,
}
# c10::ScalarType codes as they appear in Concrete Inputs (e.g. the dtype of aten::to).
SCALAR_TYPE_BYTES: dict[int, int] = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 15: 2,
    23: 1, 24: 1, 25: 1, 26: 1,
}
# Types that are not tensors even when a shape slot is present.
_NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "str", "Device", "Layout"})
# TensorList arguments carry no dtype; optimizer state is float32 in the common case.
ASSUMED_LIST_DTYPE_BYTES = 4


def dtype_bytes(type_name: str) -> int | None:
    if type_name in DTYPE_BYTES:
        return DTYPE_BYTES[type_name]
    if type_name.startswith("c10::Float8") or type_name.startswith("c10::Float4"):
        return 1
    return None


def dtype_class(type_name: str) -> str:
    """The compute class (key of the device peak table) of an element type."""
    if type_name == "c10::BFloat16":
        return "bf16"
    if type_name == "c10::Half":
        return "fp16"
    if type_name.startswith("c10::Float8") or type_name.startswith("c10::Float4"):
        return "fp8"
    if type_name == "double":
        return "fp64"
    if type_name in ("signed char", "unsigned char"):
        return "int8"
    return "fp32"


@dataclass(frozen=True)
class Tensor:
    shape: tuple[int, ...]
    type_name: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return dtype_bytes(self.type_name) or 4

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize


@dataclass(frozen=True)
class OpArgs:
    """One op's recorded arguments, position by position."""

    dims: list[Any]
    types: list[str]
    concrete: list[str]

    def tensor(self, i: int) -> Tensor | None:
        if i >= len(self.dims) or i >= len(self.types):
            return None
        dims, type_name = self.dims[i], self.types[i]
        if type_name in _NON_TENSOR_TYPES or not isinstance(dims, list):
            return None
        if any(not isinstance(d, int) for d in dims):
            return None
        return Tensor(tuple(dims), type_name)

    def tensors(self) -> list[Tensor]:
        return [t for i in range(len(self.dims)) if (t := self.tensor(i)) is not None]

    def tensor_list(self, i: int) -> list[tuple[int, ...]]:
        if i >= len(self.dims) or not isinstance(self.dims[i], list):
            return []
        return [tuple(s) for s in self.dims[i] if isinstance(s, list) and all(isinstance(d, int) for d in s)]

    def tensor_list_positions(self) -> list[int]:
        return [i for i, t in enumerate(self.types) if t == "TensorList"]

    def value(self, i: int) -> Any:
        """The concrete value at position i (bool, int, float, list) or None when not recorded."""
        if i >= len(self.concrete):
            return None
        return parse_concrete(self.concrete[i])


@dataclass(frozen=True)
class OpCost:
    flops: float
    bytes: float
    dtype_class: str
    op_class: str  # matmul | conv | attention | norm | softmax | elementwise | reduction | embedding | copy | optimizer
    note: str | None = None


def parse_concrete(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith("["):
        inner = text[1:-1].strip()
        if not inner:
            return []
        parts = [parse_concrete(p) for p in inner.split(",")]
        return parts
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text.strip("'\"")


def _as_list(value: Any, n: int, default: int) -> list[int]:
    if value is None:
        return [default] * n
    if isinstance(value, bool):
        return [int(value)] * n
    if isinstance(value, (int, float)):
        return [int(value)] * n
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        vals = [int(v) for v in value]
        return vals * n if len(vals) == 1 else vals[:n] + [default] * (n - len(vals))
    return [default] * n


def broadcast_shape(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcasting of several shapes (size-1 dims stretch; mismatches take the max)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]
        non_one = [d for d in sizes if d != 1]
        out.append(max(non_one) if non_one else 1)
    return tuple(out)


# ---- matmul family ---------------------------------------------------------------------


def _narrowest_class(tensors: Sequence[Tensor]) -> str:
    """Compute class of a matmul: under autocast the narrowest floating input decides."""
    classes = [dtype_class(t.type_name) for t in tensors]
    for cls in ("fp8", "int8", "fp16", "bf16", "fp32", "fp64"):
        if cls in classes:
            return cls
    return "fp32"


def _matmul_cost(a: Tensor, b: Tensor, extra_reads: Sequence[Tensor] = ()) -> OpCost | None:
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        return None
    if len(sa) == 1 and len(sb) == 1:
        k = sa[0]
        flops, out_numel = 2 * k, 1
    else:
        ma = (1, *sa) if len(sa) == 1 else sa
        mb = (*sb, 1) if len(sb) == 1 else sb
        m, k = ma[-2], ma[-1]
        n = mb[-1]
        batch = math.prod(broadcast_shape([ma[:-2], mb[:-2]]))
        flops = 2 * batch * m * k * n
        out_numel = batch * m * n
    cls = _narrowest_class([a, b])
    out_size = min(a.itemsize, b.itemsize)
    nbytes = a.nbytes + b.nbytes + sum(t.nbytes for t in extra_reads) + out_numel * out_size
    return OpCost(float(flops), float(nbytes), cls, "matmul")


def _mm(args: OpArgs) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    return _matmul_cost(a, b) if a and b else None


def _addmm(args: OpArgs) -> OpCost | None:
    # addmm(bias, a, b, beta, alpha) and baddbmm(input, b1, b2, ...): the product of 1 and 2.
    bias, a, b = args.tensor(0), args.tensor(1), args.tensor(2)
    if not (a and b):
        return None
    return _matmul_cost(a, b, extra_reads=[bias] if bias else [])


def _linear(args: OpArgs) -> OpCost | None:
    x, w, bias = args.tensor(0), args.tensor(1), args.tensor(2)
    if not (x and w) or len(w.shape) != 2 or not x.shape:
        return None
    n, k = w.shape
    rows = x.numel // max(x.shape[-1], 1)
    flops = 2 * rows * k * n
    cls = _narrowest_class([x, w])
    out_size = min(x.itemsize, w.itemsize)
    nbytes = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + rows * n * out_size
    return OpCost(float(flops), float(nbytes), cls, "matmul")


# ---- convolution -----------------------------------------------------------------------


def _conv_out_spatial(
    in_spatial: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Any, dilation: Sequence[int]
) -> list[int]:
    n = len(in_spatial)
    if padding == "same":
        return list(in_spatial)
    pads = [0] * n if padding == "valid" else _as_list(padding, n, 0)
    return [
        max((i + 2 * p - d * (k - 1) - 1) // s + 1, 0)
        for i, k, s, p, d in zip(in_spatial, kernel, stride, pads, dilation, strict=False)
    ]


def _conv_core(
    x: Tensor, w: Tensor, stride: Any, padding: Any, dilation: Any, groups: Any, transposed: bool
) -> tuple[int, int] | None:
    """(forward FLOPs, output numel) of a convolution; weight is [C_out, C_in/g, *k]."""
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    n_sp = len(x.shape) - 2
    kernel = w.shape[2:]
    s = _as_list(stride, n_sp, 1)
    d = _as_list(dilation, n_sp, 1)
    g = groups if isinstance(groups, int) and not isinstance(groups, bool) and groups > 0 else 1
    batch = x.shape[0]
    if transposed:
        # Weight of a transposed conv is [C_in, C_out/g, *k]; its work scales with the input.
        out_channels = w.shape[1] * g
        flops = 2 * batch * math.prod(x.shape[2:]) * math.prod(w.shape)
        pads = _as_list(padding, n_sp, 0)
        out_sp = [(i - 1) * st - 2 * p + dd * (k - 1) + 1 for i, st, p, dd, k in zip(x.shape[2:], s, pads, d, kernel, strict=False)]
        return flops, batch * out_channels * math.prod(out_sp)
    out_sp = _conv_out_spatial(x.shape[2:], kernel, s, padding, d)
    flops = 2 * batch * math.prod(out_sp) * math.prod(w.shape)
    return flops, batch * w.shape[0] * math.prod(out_sp)


# Positions of (input, weight, bias, stride, padding, dilation, transposed, groups) per op.
_CONV_ARGS: dict[str, tuple[int, int, int | None, int, int, int, int | None, int]] = {
    "aten::conv1d": (0, 1, 2, 3, 4, 5, None, 6),
    "aten::conv2d": (0, 1, 2, 3, 4, 5, None, 6),
    "aten::conv3d": (0, 1, 2, 3, 4, 5, None, 6),
    "aten::convolution": (0, 1, 2, 3, 4, 5, 6, 8),
    "aten::_convolution": (0, 1, 2, 3, 4, 5, 6, 8),
    "aten::cudnn_convolution": (0, 1, None, 3, 2, 4, None, 5),
    "aten::miopen_convolution": (0, 1, 2, 4, 3, 5, None, 6),
    "aten::mkldnn_convolution": (0, 1, 2, 4, 3, 5, None, 6),
    "aten::_convolution_mode": (0, 1, 2, 3, 4, 5, None, 6),
    "aten::conv_transpose1d": (0, 1, 2, 3, 4, 7, None, 6),
    "aten::conv_transpose2d": (0, 1, 2, 3, 4, 7, None, 6),
    "aten::conv_transpose3d": (0, 1, 2, 3, 4, 7, None, 6),
    "aten::cudnn_convolution_transpose": (0, 1, None, 4, 2, 5, None, 6),
}


def _conv(name: str, args: OpArgs) -> OpCost | None:
    xi, wi, bi, si, pi, di, ti, gi = _CONV_ARGS[name]
    x, w = args.tensor(xi), args.tensor(wi)
    if not (x and w):
        return None
    transposed = "transpose" in name or (ti is not None and bool(args.value(ti)))
    core = _conv_core(x, w, args.value(si), args.value(pi), args.value(di), args.value(gi), transposed)
    if core is None:
        return None
    flops, out_numel = core
    bias = args.tensor(bi) if bi is not None else None
    nbytes = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + out_numel * x.itemsize
    return OpCost(float(flops), float(nbytes), _narrowest_class([x, w]), "conv")


def _conv_backward(args: OpArgs) -> OpCost | None:
    # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    #                      transposed, output_padding, groups, output_mask)
    g, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if not (g and x and w):
        return None
    transposed = bool(args.value(7))
    core = _conv_core(x, w, args.value(4), args.value(5), args.value(6), args.value(9), transposed)
    if core is None:
        return None
    fwd, _ = core
    mask = args.value(10)
    want_input, want_weight = (mask[0], mask[1]) if isinstance(mask, list) and len(mask) >= 2 else (True, True)
    flops = fwd * (int(bool(want_input)) + int(bool(want_weight)))
    nbytes = g.nbytes + x.nbytes + w.nbytes
    nbytes += x.nbytes if want_input else 0
    nbytes += w.nbytes if want_weight else 0
    return OpCost(float(flops), float(nbytes), _narrowest_class([x, w]), "conv")


# ---- attention -------------------------------------------------------------------------

# name -> (layout, index of is_causal or custom_mask_type, backward?, mask is custom_mask_type)
# layout "bhsd": [batch, heads, seq, dim]; "bshd": [batch, seq, heads, dim].
_ATTENTION: dict[str, tuple[str, int | None, bool, bool, int]] = {
    # name: (layout, causal index, backward, causal-is-mask-type, first q/k/v position)
    "aten::scaled_dot_product_attention": ("bhsd", 5, False, False, 0),
    "aten::_scaled_dot_product_flash_attention": ("bhsd", 4, False, False, 0),
    "aten::_scaled_dot_product_flash_attention_for_cpu": ("bhsd", 4, False, False, 0),
    "aten::_scaled_dot_product_efficient_attention": ("bhsd", 6, False, False, 0),
    "aten::_scaled_dot_product_cudnn_attention": ("bhsd", 6, False, False, 0),
    "aten::_scaled_dot_product_fused_attention_overrideable": ("bhsd", 5, False, False, 0),
    "aten::_flash_attention_forward": ("bshd", 8, False, False, 0),
    "aten::_efficient_attention_forward": ("bshd", 9, False, True, 0),
    "aten::_scaled_dot_product_flash_attention_backward": ("bhsd", 11, True, False, 1),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", 8, True, False, 1),
    "aten::_scaled_dot_product_efficient_attention_backward": ("bhsd", 11, True, False, 1),
    "aten::_scaled_dot_product_cudnn_attention_backward": ("bhsd", 14, True, False, 1),
    "aten::_flash_attention_backward": ("bshd", 11, True, False, 1),
    "aten::_efficient_attention_backward": ("bshd", 14, True, True, 1),
}


def _attention(name: str, args: OpArgs) -> OpCost | None:
    layout, causal_i, backward, mask_type, first = _ATTENTION[name]
    q, k, v = args.tensor(first), args.tensor(first + 1), args.tensor(first + 2)
    if not (q and k and v) or len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        return None
    if layout == "bhsd":
        b, h, sq, d = q.shape
        sk, dv = k.shape[2], v.shape[3]
    else:
        b, sq, h, d = q.shape
        sk, dv = k.shape[1], v.shape[3]
    flops = 2.0 * b * h * sq * sk * d + 2.0 * b * h * sq * sk * dv
    causal_value = args.value(causal_i) if causal_i is not None else None
    causal = (isinstance(causal_value, int) and causal_value != 0) if mask_type else causal_value is True
    note = None
    if causal:
        flops *= 0.5
        note = "causal: half the score matrix"
    out_bytes = b * h * sq * dv * q.itemsize
    if backward:
        flops *= 2.0
        # grad_out, q, k, v, out read; grad_q, grad_k, grad_v written.
        nbytes = 2 * out_bytes + 2 * (q.nbytes + k.nbytes + v.nbytes)
    else:
        nbytes = q.nbytes + k.nbytes + v.nbytes + out_bytes
    return OpCost(flops, float(nbytes), _narrowest_class([q, k, v]), "attention", note)


# ---- normalisation, softmax ------------------------------------------------------------

# FLOPs per element: mean, variance, normalise, scale, shift (forward); about twice back.
_NORM_FLOPS_PER_ELEM = 5.0
_NORM_BWD_FLOPS_PER_ELEM = 10.0
_SOFTMAX_FLOPS_PER_ELEM = 5.0  # max, subtract, exp, sum, divide
_SOFTMAX_BWD_FLOPS_PER_ELEM = 4.0


def _norm(args: OpArgs, backward: bool) -> OpCost | None:
    tensors = args.tensors()
    if not tensors:
        return None
    x = max(tensors, key=lambda t: t.numel)
    params = sum(t.nbytes for t in tensors if t.numel < x.numel)
    if backward:
        # grad_out and input read, grad_input written (+ parameter grads).
        nbytes = 3 * x.nbytes + 2 * params
        flops = _NORM_BWD_FLOPS_PER_ELEM * x.numel
    else:
        nbytes = 2 * x.nbytes + params
        flops = _NORM_FLOPS_PER_ELEM * x.numel
    return OpCost(flops, float(nbytes), "fp32", "norm")


def _softmax(args: OpArgs, backward: bool) -> OpCost | None:
    x = args.tensor(0)
    if not x:
        return None
    if backward:
        return OpCost(_SOFTMAX_BWD_FLOPS_PER_ELEM * x.numel, 3.0 * x.nbytes, "fp32", "softmax")
    return OpCost(_SOFTMAX_FLOPS_PER_ELEM * x.numel, 2.0 * x.nbytes, "fp32", "softmax")


# ---- elementwise, reductions -----------------------------------------------------------

_UNARY = {
    "relu", "gelu", "silu", "sigmoid", "tanh", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt",
    "rsqrt", "neg", "abs", "reciprocal", "sin", "cos", "erf", "erfinv", "sign", "floor", "ceil",
    "round", "trunc", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu", "elu", "mish",
    "softplus", "hardswish", "hardsigmoid", "logical_not", "bitwise_not", "nan_to_num", "square",
    "fill", "zero", "threshold", "pow", "native_dropout", "dropout", "bernoulli", "uniform", "normal",
    "tril", "triu", "isnan", "isinf", "sgn", "frac", "relu6", "selu", "celu", "glu",
}
_BINARY = {
    "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
    "maximum", "minimum", "max_pool_placeholder", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
    "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "atan2", "hypot",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "masked_fill", "native_dropout_backward", "xlogy", "copysign", "leaky_relu_backward",
    "hardtanh_backward", "elu_backward", "softplus_backward", "mse_loss_backward", "mul_scalar",
}
_TERNARY = {"addcmul", "addcdiv", "lerp", "where", "clamp_tensor", "masked_scatter"}
# Arithmetic steps per output element beyond one.
_EXTRA_FLOPS = {"addcmul": 2.0, "addcdiv": 2.0, "lerp": 2.0, "gelu": 8.0, "gelu_backward": 12.0, "silu": 4.0, "silu_backward": 6.0}
_REDUCTIONS = {
    "sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm", "var", "std",
    "var_mean", "std_mean", "argmax", "argmin", "all", "any", "logsumexp", "nansum", "count_nonzero",
}
_COPIES = {"copy_", "to", "_to_copy", "contiguous", "clone", "_copy_from", "_copy_from_and_resize"}
_FUSED_OPTIMIZERS = {"_fused_adamw_": 7, "_fused_adam_": 7, "_fused_adamw": 7, "_fused_adam": 7, "_fused_sgd_": 3, "_fused_sgd": 3, "_fused_adagrad_": 5}
_ADAM_FLOPS_PER_PARAM = 14.0  # decay, two moment updates, bias corrections, sqrt, divide, step


def _base_name(name: str) -> str:
    return name[len("aten::"):] if name.startswith("aten::") else name


def _elementwise(base: str, args: OpArgs) -> OpCost | None:
    inplace = base.endswith("_") and not base.startswith("_")
    op = base.rstrip("_") if inplace else base
    arity = 1 if op in _UNARY else 2 if op in _BINARY else 3
    tensors = args.tensors()
    if not tensors:
        return None
    reads = tensors[:arity]
    out_arg = tensors[arity] if len(tensors) > arity else None
    out_shape = broadcast_shape([t.shape for t in reads])
    out_numel = math.prod(out_shape)
    out_size = (out_arg or reads[0]).itemsize
    if op in ("fill", "zero", "uniform", "normal", "bernoulli"):
        reads = []  # these only write their output
    nbytes = sum(t.nbytes for t in reads) + out_numel * out_size
    flops = out_numel * _EXTRA_FLOPS.get(op, 1.0)
    return OpCost(float(flops), float(nbytes), "fp32", "elementwise")


def _reduction(args: OpArgs) -> OpCost | None:
    x = args.tensor(0)
    if not x:
        return None
    dims = args.value(1)
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = [dims]
    if isinstance(dims, list) and dims and x.shape and all(isinstance(d, int) for d in dims):
        reduced = math.prod(x.shape[d % len(x.shape)] for d in dims)
        out_numel = x.numel // max(reduced, 1)
    else:
        out_numel = 1
    return OpCost(float(x.numel), float(x.nbytes + out_numel * x.itemsize), "fp32", "reduction")


def _copy(base: str, args: OpArgs) -> OpCost | None:
    tensors = args.tensors()
    if not tensors:
        return None
    if base == "copy_" and len(tensors) >= 2:
        dst, src = tensors[0], tensors[1]
        return OpCost(0.0, float(src.nbytes + dst.numel * dst.itemsize), "fp32", "copy")
    x = tensors[0]
    out_size = x.itemsize
    if base in ("to", "_to_copy"):
        code = args.value(1)
        if isinstance(code, int) and not isinstance(code, bool) and code in SCALAR_TYPE_BYTES:
            out_size = SCALAR_TYPE_BYTES[code]
    return OpCost(0.0, float(x.nbytes + x.numel * out_size), "fp32", "copy")


def _cat(args: OpArgs) -> OpCost | None:
    positions = args.tensor_list_positions()
    if not positions:
        return None
    shapes = args.tensor_list(positions[0])
    numel = sum(math.prod(s) for s in shapes)
    return OpCost(0.0, float(2 * numel * ASSUMED_LIST_DTYPE_BYTES), "fp32", "copy", "list dtype assumed float32")


def _embedding(args: OpArgs) -> OpCost | None:
    weight, idx = args.tensor(0), args.tensor(1)
    if not (weight and idx) or len(weight.shape) != 2:
        return None
    dim = weight.shape[1]
    gathered = idx.numel * dim * weight.itemsize
    return OpCost(0.0, float(idx.nbytes + 2 * gathered), "fp32", "embedding")


def _embedding_backward(args: OpArgs) -> OpCost | None:
    # embedding_(dense_)backward(grad_output, indices, num_weights, padding_idx, ...)
    grad, idx = args.tensor(0), args.tensor(1)
    num_weights = args.value(2)
    if not (grad and idx) or not grad.shape:
        return None
    rows = num_weights if isinstance(num_weights, int) and not isinstance(num_weights, bool) else 0
    weight_bytes = rows * grad.shape[-1] * grad.itemsize
    return OpCost(float(grad.numel), float(grad.nbytes + idx.nbytes + weight_bytes), "fp32", "embedding")


def _foreach(base: str, args: OpArgs) -> OpCost | None:
    positions = args.tensor_list_positions()
    if not positions:
        return None
    numel = sum(math.prod(s) for s in args.tensor_list(positions[0]))
    if numel == 0:
        return None
    op = base[len("_foreach_"):].rstrip("_")
    n_lists = len(positions)
    # Every list read once and one list written (in place or a new one).
    nbytes = (n_lists + 1) * numel * ASSUMED_LIST_DTYPE_BYTES
    flops = numel * _EXTRA_FLOPS.get(op, 1.0)
    return OpCost(float(flops), float(nbytes), "fp32", "optimizer", "list dtype assumed float32")


def _fused_optimizer(base: str, args: OpArgs) -> OpCost | None:
    positions = args.tensor_list_positions()
    if not positions:
        return None
    numel = sum(math.prod(s) for s in args.tensor_list(positions[0]))
    if numel == 0:
        return None
    touches = _FUSED_OPTIMIZERS[base]  # list reads + writes per parameter element
    flops = numel * (_ADAM_FLOPS_PER_PARAM if "adam" in base else 3.0)
    return OpCost(float(flops), float(touches * numel * ASSUMED_LIST_DTYPE_BYTES), "fp32", "optimizer", "list dtype assumed float32")


_NORMS = {"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm", "batch_norm", "native_batch_norm", "_batch_norm_impl_index", "cudnn_batch_norm", "instance_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"}
_NORM_BACKWARDS = {"native_layer_norm_backward", "native_group_norm_backward", "_fused_rms_norm_backward", "native_batch_norm_backward", "cudnn_batch_norm_backward", "batch_norm_backward", "rms_norm_backward"}
_SOFTMAXES = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"}
_SOFTMAX_BACKWARDS = {"_softmax_backward_data", "_log_softmax_backward_data"}
_MATMULS: dict[str, Callable[[OpArgs], OpCost | None]] = {
    "mm": _mm, "bmm": _mm, "matmul": _mm, "_scaled_mm": _mm, "_int_mm": _mm, "dot": _mm, "mv": _mm,
    "addmm": _addmm, "baddbmm": _addmm, "addbmm": _addmm, "addmv": _addmm, "_addmm_activation": _addmm,
    "linear": _linear,
}


def cost_of(args: OpArgs, name: str) -> OpCost | None:
    """The cost of one op call, or None when its name or arguments are not understood."""
    base = _base_name(name)
    if not name.startswith("aten::"):
        return None
    if base in _MATMULS:
        return _MATMULS[base](args)
    if name in _CONV_ARGS:
        return _conv(name, args)
    if base == "convolution_backward":
        return _conv_backward(args)
    if name in _ATTENTION:
        return _attention(name, args)
    if base in _NORMS:
        return _norm(args, backward=False)
    if base in _NORM_BACKWARDS:
        return _norm(args, backward=True)
    if base in _SOFTMAXES:
        return _softmax(args, backward=False)
    if base in _SOFTMAX_BACKWARDS:
        return _softmax(args, backward=True)
    if base.startswith("_foreach_"):
        return _foreach(base, args)
    if base in _FUSED_OPTIMIZERS:
        return _fused_optimizer(base, args)
    if base in ("embedding", "embedding_renorm_"):
        return _embedding(args)
    if base in ("embedding_backward", "embedding_dense_backward"):
        return _embedding_backward(args)
    if base in _COPIES:
        return _copy(base, args)
    if base == "cat":
        return _cat(args)
    if base in _REDUCTIONS:
        return _reduction(args)
    stem = base.rstrip("_") if base.endswith("_") and not base.startswith("_") else base
    if stem in _UNARY or stem in _BINARY or stem in _TERNARY:
        return _elementwise(base, args)
    return None


def _loads_list(text: str | None) -> list[Any] | None:
    if text is None or text == "":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        # Kineto writes some non-JSON tokens (e.g. unquoted nan) in Concrete Inputs.
        try:
            value = json.loads(re.sub(r"\bnan\b|\binf\b", "0", text))
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def op_cost(name: str, input_dims: str | None, input_types: str | None, concrete_inputs: str | None = None) -> OpCost | None:
    """Cost of one op from its raw Kineto argument text (JSON lists of dims, types, values)."""
    dims = _loads_list(input_dims)
    types = _loads_list(input_types)
    if dims is None or types is None:
        return None
    concrete = _loads_list(concrete_inputs) or []
    args = OpArgs(dims=dims, types=[str(t) for t in types], concrete=[str(c) if not isinstance(c, str) else c for c in concrete])
    try:
        return cost_of(args, name)
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        return None


COST_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "dtype_class": pl.String,
    "op_class": pl.String,
    "cost_note": pl.String,
}
_KEYS = ["name", "input_dims", "input_types", "concrete_inputs"]


def op_costs(events: pl.DataFrame) -> pl.DataFrame:
    """One row per cpu_op whose cost is known: id, flops, bytes, dtype_class, op_class, note."""
    ops = events.filter((pl.col("kind") == "cpu_op") & pl.col("input_dims").is_not_null()).select(
        "id", pl.col("name").cast(pl.String), "input_dims", "input_types", "concrete_inputs"
    )
    if ops.height == 0:
        return pl.DataFrame(schema=COST_COLUMNS)
    combos = ops.select(_KEYS).unique()
    rows = []
    for name, dims, types, concrete in combos.iter_rows():
        cost = op_cost(name, dims, types, concrete)
        if cost is not None:
            rows.append((name, dims, types, concrete, cost.flops, cost.bytes, cost.dtype_class, cost.op_class, cost.note))
    table = pl.DataFrame(
        rows,
        schema={
            "name": pl.String, "input_dims": pl.String, "input_types": pl.String, "concrete_inputs": pl.String,
            "flops": pl.Float64, "bytes": pl.Float64, "dtype_class": pl.String, "op_class": pl.String,
            "cost_note": pl.String,
        },
        orient="row",
    )
    joined = ops.join(table, on=_KEYS, how="inner", nulls_equal=True)
    return joined.select(list(COST_COLUMNS)).cast(COST_COLUMNS)  # type: ignore[arg-type]


KERNEL_COST_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "flops": pl.Float64,
    "bytes": pl.Float64,
    "dtype_class": pl.String,
    "op_class": pl.String,
    "cost_source": pl.String,
    "costed_op_id": pl.Int64,
    "family": pl.String,
    "subfamily": pl.String,
    "tensor_core": pl.Boolean,
}


def _nearest_costed(op_ids: pl.DataFrame, parents: pl.DataFrame, costed: pl.DataFrame) -> pl.DataFrame:
    """Per kernel (id, op_id): the innermost op at or above op_id that has a known cost.

    The innermost one is the most specific (``aten::mm`` rather than the ``aten::matmul``
    around it); an outer op's cost is used only by kernels none of its costed children
    launched. Loops once per nesting level.
    """
    current = op_ids.select("id", pl.col("op_id").alias("cur")).filter(pl.col("cur").is_not_null())
    found = []
    costed_ids = costed.select(pl.col("id").alias("cur"), pl.lit(True).alias("_hit"))
    while current.height:
        current = current.join(costed_ids, on="cur", how="left")
        found.append(current.filter(pl.col("_hit").fill_null(False)).select("id", pl.col("cur").alias("costed_op_id")))
        current = (
            current.filter(~pl.col("_hit").fill_null(False))
            .select("id", "cur")
            .join(parents, left_on="cur", right_on="pid_", how="left")
            .select("id", pl.col("parent").alias("cur"))
            .filter(pl.col("cur").is_not_null())
        )
    if not found:
        return pl.DataFrame(schema={"id": pl.Int64, "costed_op_id": pl.Int64})
    return pl.concat(found)


def kernel_costs(trace: Any) -> pl.DataFrame:
    """FLOPs and bytes of each kernel/memcpy/memset (``KERNEL_COST_COLUMNS``).

    A kernel takes the cost of the nearest op above it that has one; an op that launched
    several kernels has its cost split among them by kernel duration. Memcpys and memsets
    move the bytes their events record. Kernels without either get no cost (null
    ``cost_source``) but keep their family, from which callers may guess a bound. FP32
    matmul-like work running on tensor-core kernels is counted as TF32.
    """
    from traceinsight.analysis.kernel_families import with_families

    kernels = trace.kernels.select("id", "name", pl.col("kind").cast(pl.String), "dur_ns", "op_id", "bytes")
    if kernels.height == 0:
        return pl.DataFrame(schema=KERNEL_COST_COLUMNS)
    kernels = with_families(kernels, "name")
    costs = op_costs(trace.events)
    parents = trace.events.select(pl.col("id").alias("pid_"), "parent")
    is_kernel = pl.col("kind") == "kernel"
    nearest = _nearest_costed(kernels.filter(is_kernel), parents, costs)
    k = kernels.join(nearest, on="id", how="left").join(
        costs.rename({"id": "costed_op_id", "bytes": "op_bytes"}), on="costed_op_id", how="left"
    )
    total = pl.col("dur_ns").sum().over("costed_op_id")
    count = pl.len().over("costed_op_id")
    share = pl.when(total > 0).then(pl.col("dur_ns") / total).otherwise(1.0 / count)
    matmul_like = pl.col("op_class").is_in(["matmul", "conv", "attention"])
    transfer = pl.col("kind").is_in(["memcpy", "memset"])
    k = k.with_columns(
        pl.when(transfer).then(pl.lit(0.0)).when(pl.col("costed_op_id").is_not_null()).then(pl.col("flops") * share).alias("flops"),
        pl.when(transfer).then(pl.col("bytes").cast(pl.Float64)).when(pl.col("costed_op_id").is_not_null()).then(pl.col("op_bytes") * share).alias("bytes"),
        pl.when(transfer)
        .then(pl.lit("fp32"))
        .when(matmul_like & (pl.col("dtype_class") == "fp32") & pl.col("tensor_core"))
        .then(pl.lit("tf32"))
        .otherwise(pl.col("dtype_class"))
        .alias("dtype_class"),
        pl.when(transfer).then(pl.col("kind")).otherwise(pl.col("op_class")).alias("op_class"),
        pl.when(transfer & pl.col("bytes").is_not_null())
        .then(pl.lit("transfer"))
        .when(pl.col("costed_op_id").is_not_null())
        .then(pl.lit("op"))
        .alias("cost_source"),
    )
    return k.select([pl.col(c).cast(t) for c, t in KERNEL_COST_COLUMNS.items()])
