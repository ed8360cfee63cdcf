"""Cost formulas of matmul-like ops: mm/addmm/linear, convolutions (forward and backward) and
attention."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from traceinsight.analysis.cost.args import (
    OpArgs,
    OpCost,
    Tensor,
    as_list,
    broadcast_shape,
    dtype_class,
)

# ---- matmul family ---------------------------------------------------------------------


def narrowest_class(tensors: Sequence[Tensor]) -> str:
    """Compute class of a matmul: under autocast the narrowest floating input decides."""
    classes = [dtype_class(t.type_name) for t in tensors]
    for cls in ("fp8", "int8", "fp16", "bf16", "fp32", "fp64"):
        if cls in classes:
            return cls
    return "fp32"


def matmul_cost(a: Tensor, b: Tensor, extra_reads: Sequence[Tensor] = ()) -> OpCost | None:
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
    cls = narrowest_class([a, b])
    out_size = min(a.itemsize, b.itemsize)
    nbytes = a.nbytes + b.nbytes + sum(t.nbytes for t in extra_reads) + out_numel * out_size
    return OpCost(float(flops), float(nbytes), cls, "matmul")


def mm_cost(args: OpArgs) -> OpCost | None:
    a, b = args.tensor(0), args.tensor(1)
    return matmul_cost(a, b) if a and b else None


def addmm_cost(args: OpArgs) -> OpCost | None:
    # addmm(bias, a, b, beta, alpha) and baddbmm(input, b1, b2, ...): the product of 1 and 2.
    bias, a, b = args.tensor(0), args.tensor(1), args.tensor(2)
    if not (a and b):
        return None
    return matmul_cost(a, b, extra_reads=[bias] if bias else [])


def linear_cost(args: OpArgs) -> OpCost | None:
    x, w, bias = args.tensor(0), args.tensor(1), args.tensor(2)
    if not (x and w) or len(w.shape) != 2 or not x.shape:
        return None
    n, k = w.shape
    rows = x.numel // max(x.shape[-1], 1)
    flops = 2 * rows * k * n
    cls = narrowest_class([x, w])
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
    pads = [0] * n if padding == "valid" else as_list(padding, n, 0)
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
    s = as_list(stride, n_sp, 1)
    d = as_list(dilation, n_sp, 1)
    g = groups if isinstance(groups, int) and not isinstance(groups, bool) and groups > 0 else 1
    batch = x.shape[0]
    if transposed:
        # Weight of a transposed conv is [C_in, C_out/g, *k]; its work scales with the input.
        out_channels = w.shape[1] * g
        flops = 2 * batch * math.prod(x.shape[2:]) * math.prod(w.shape)
        pads = as_list(padding, n_sp, 0)
        out_sp = [(i - 1) * st - 2 * p + dd * (k - 1) + 1 for i, st, p, dd, k in zip(x.shape[2:], s, pads, d, kernel, strict=False)]
        return flops, batch * out_channels * math.prod(out_sp)
    out_sp = _conv_out_spatial(x.shape[2:], kernel, s, padding, d)
    flops = 2 * batch * math.prod(out_sp) * math.prod(w.shape)
    return flops, batch * w.shape[0] * math.prod(out_sp)


# Positions of (input, weight, bias, stride, padding, dilation, transposed, groups) per op.
CONV_ARGS: dict[str, tuple[int, int, int | None, int, int, int, int | None, int]] = {
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


def conv_cost(name: str, args: OpArgs) -> OpCost | None:
    xi, wi, bi, si, pi, di, ti, gi = CONV_ARGS[name]
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
    return OpCost(float(flops), float(nbytes), narrowest_class([x, w]), "conv")


def conv_backward_cost(args: OpArgs) -> OpCost | None:
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
    return OpCost(float(flops), float(nbytes), narrowest_class([x, w]), "conv")


# ---- attention -------------------------------------------------------------------------

# name -> (layout, index of is_causal or custom_mask_type, backward?, mask is custom_mask_type)
# layout "bhsd": [batch, heads, seq, dim]; "bshd": [batch, seq, heads, dim].
ATTENTION_OPS: dict[str, tuple[str, int | None, bool, bool, int]] = {
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


def attention_cost(name: str, args: OpArgs) -> OpCost | None:
    layout, causal_i, backward, mask_type, first = ATTENTION_OPS[name]
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
        # Fused backward kernels (flash, memory-efficient, cuDNN) recompute QKᵀ, then run
        # dV = PᵀdO, dP = dOVᵀ, dQ = dSK, dK = dSᵀQ: five GEMMs against forward's two.
        flops *= 2.5
        # grad_out, q, k, v, out read; grad_q, grad_k, grad_v written.
        nbytes = 2 * out_bytes + 2 * (q.nbytes + k.nbytes + v.nbytes)
    else:
        nbytes = q.nbytes + k.nbytes + v.nbytes + out_bytes
    return OpCost(flops, float(nbytes), narrowest_class([q, k, v]), "attention", note)
