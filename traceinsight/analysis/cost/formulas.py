"""Cost formulas of the other ops (normalisation, softmax, elementwise, reductions, copies,
embeddings, optimizers) and ``cost_of``, which picks the formula for an op name."""

from __future__ import annotations

import math
from collections.abc import Callable

from traceinsight.analysis.cost.args import (
    ASSUMED_LIST_DTYPE_BYTES,
    SCALAR_TYPE_BYTES,
    OpArgs,
    OpCost,
    broadcast_shape,
)
from traceinsight.analysis.cost.matmul import (
    ATTENTION_OPS,
    CONV_ARGS,
    addmm_cost,
    attention_cost,
    conv_backward_cost,
    conv_cost,
    linear_cost,
    mm_cost,
)

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
    if op == "addcmul" and len(reads) == 3 and reads[1] == reads[2]:
        reads = reads[:2]  # addcmul(v, g, g), as torch.optim calls it: g read once (see _foreach)
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
    nbytes = float(2 * numel * ASSUMED_LIST_DTYPE_BYTES)
    return OpCost(0.0, nbytes, "fp32", "copy", _LIST_NOTE, list_bytes=nbytes)


_LIST_NOTE = "list element size from the kernels' names (float32 when they do not say)"


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
    note = _LIST_NOTE
    if _squares_one_list(op, args, positions):
        # torch.optim's squared-gradient update v += c·g·g passes one list twice: the second
        # read of g hits the cache, so DRAM sees it once.
        n_lists -= 1
        note += "; tensor lists 2 and 3 alike: counted once (v += c·g·g)"
    # Every distinct list read once and one list written (in place or a new one).
    nbytes = float((n_lists + 1) * numel * ASSUMED_LIST_DTYPE_BYTES)
    flops = numel * _EXTRA_FLOPS.get(op, 1.0)
    return OpCost(float(flops), nbytes, "fp32", "optimizer", note, list_bytes=nbytes)


def _squares_one_list(op: str, args: OpArgs, positions: list[int]) -> bool:
    """True for addcmul(v, g, g): Kineto records no tensor identities, so two factor lists of
    identical shapes are taken as one. Every torch.optim caller of foreach addcmul (Adam,
    AdamW, NAdam, RAdam, RMSprop, Adagrad, Adadelta) passes ``grads, grads``."""
    if op != "addcmul" or len(positions) < 3:
        return False
    first, second = args.tensor_list(positions[1]), args.tensor_list(positions[2])
    return bool(first) and first == second


def _fused_optimizer(base: str, args: OpArgs) -> OpCost | None:
    positions = args.tensor_list_positions()
    if not positions:
        return None
    numel = sum(math.prod(s) for s in args.tensor_list(positions[0]))
    if numel == 0:
        return None
    touches = _FUSED_OPTIMIZERS[base]  # list reads + writes per parameter element
    flops = numel * (_ADAM_FLOPS_PER_PARAM if "adam" in base else 3.0)
    nbytes = float(touches * numel * ASSUMED_LIST_DTYPE_BYTES)
    return OpCost(float(flops), nbytes, "fp32", "optimizer", _LIST_NOTE, list_bytes=nbytes)


_NORMS = {"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "rms_norm", "_fused_rms_norm", "batch_norm", "native_batch_norm", "_batch_norm_impl_index", "cudnn_batch_norm", "instance_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"}
_NORM_BACKWARDS = {"native_layer_norm_backward", "native_group_norm_backward", "_fused_rms_norm_backward", "native_batch_norm_backward", "cudnn_batch_norm_backward", "batch_norm_backward", "rms_norm_backward"}
_SOFTMAXES = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"}
_SOFTMAX_BACKWARDS = {"_softmax_backward_data", "_log_softmax_backward_data"}
_MATMULS: dict[str, Callable[[OpArgs], OpCost | None]] = {
    "mm": mm_cost, "bmm": mm_cost, "matmul": mm_cost, "_scaled_mm": mm_cost, "_int_mm": mm_cost, "dot": mm_cost, "mv": mm_cost,
    "addmm": addmm_cost, "baddbmm": addmm_cost, "addbmm": addmm_cost, "addmv": addmm_cost, "_addmm_activation": addmm_cost,
    "linear": linear_cost,
}


def cost_of(args: OpArgs, name: str) -> OpCost | None:
    """The cost of one op call, or None when its name or arguments are not understood."""
    base = _base_name(name)
    if not name.startswith("aten::"):
        return None
    if base in _MATMULS:
        return _MATMULS[base](args)
    if name in CONV_ARGS:
        return conv_cost(name, args)
    if base == "convolution_backward":
        return conv_backward_cost(args)
    if name in ATTENTION_OPS:
        return attention_cost(name, args)
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
