"""FLOP and byte formulas of the cost model, checked against hand-computed values."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.cost.model import (
    broadcast_shape,
    dtype_bytes,
    kernel_costs,
    op_cost,
    op_costs,
)
from traceinsight.trace.loader import load

F32, BF16 = "float", "c10::BFloat16"


def cost(name: str, dims: list, types: list, concrete: list | None = None):  # type: ignore[no-untyped-def]
    return op_cost(
        name,
        json.dumps(dims),
        json.dumps(types),
        json.dumps(concrete if concrete is not None else [""] * len(dims)),
    )


def test_dtype_sizes() -> None:
    assert dtype_bytes("float") == 4
    assert dtype_bytes("c10::BFloat16") == 2
    assert dtype_bytes("c10::Half") == 2
    assert dtype_bytes("c10::Float8_e4m3fn") == 1
    assert dtype_bytes("double") == 8
    assert dtype_bytes("long int") == 8
    assert dtype_bytes("int") == 4
    assert dtype_bytes("bool") == 1
    assert dtype_bytes("Scalar") is None


def test_mm() -> None:
    c = cost("aten::mm", [[64, 32], [32, 16]], [F32, F32])
    assert c is not None
    assert c.flops == 2 * 64 * 32 * 16
    assert c.bytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert (c.dtype_class, c.op_class) == ("fp32", "matmul")


def test_mm_with_out_argument_counts_output_once() -> None:
    c = cost("aten::mm", [[8, 8], [8, 8], [8, 8]], [BF16, BF16, BF16])
    assert c is not None
    assert c.flops == 2 * 8**3
    assert c.bytes == 2 * 3 * 64
    assert c.dtype_class == "bf16"


def test_addmm_counts_products_and_reads_bias() -> None:
    c = cost(
        "aten::addmm",
        [[16], [128, 64], [64, 16], [], []],
        [F32, F32, F32, "Scalar", "Scalar"],
        ["", "", "", "1", "1"],
    )
    assert c is not None
    assert c.flops == 2 * 128 * 64 * 16
    assert c.bytes == 4 * (16 + 128 * 64 + 64 * 16 + 128 * 16)


def test_bmm_and_baddbmm() -> None:
    b = cost("aten::bmm", [[4, 8, 16], [4, 16, 32]], [BF16, BF16])
    assert b is not None and b.flops == 2 * 4 * 8 * 16 * 32
    assert b.bytes == 2 * (4 * 8 * 16 + 4 * 16 * 32 + 4 * 8 * 32)
    bb = cost(
        "aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32], [], []], [BF16] * 3 + ["Scalar"] * 2
    )
    assert bb is not None and bb.flops == b.flops


def test_matmul_broadcasts_batch_dims() -> None:
    # [2, 3, 5, 7] @ [7, 11]: batch 6, output [2, 3, 5, 11].
    c = cost("aten::matmul", [[2, 3, 5, 7], [7, 11]], [F32, F32])
    assert c is not None
    assert c.flops == 2 * 6 * 5 * 7 * 11
    assert c.bytes == 4 * (2 * 3 * 5 * 7 + 7 * 11 + 6 * 5 * 11)
    dot = cost("aten::matmul", [[9], [9]], [F32, F32])
    assert dot is not None and dot.flops == 18


def test_linear() -> None:
    c = cost("aten::linear", [[16, 128, 256], [1024, 256], [1024]], [F32, F32, F32])
    assert c is not None
    assert c.flops == 2 * 16 * 128 * 256 * 1024
    assert c.bytes == 4 * (16 * 128 * 256 + 1024 * 256 + 1024 + 16 * 128 * 1024)


def test_linear_under_autocast_takes_the_narrow_dtype() -> None:
    c = cost("aten::linear", [[8, 4], [2, 4], [2]], [BF16, F32, F32])
    assert c is not None and c.dtype_class == "bf16"


def test_conv2d_stride_padding_groups() -> None:
    # input [2, 8, 32, 32], weight [16, 4, 3, 3], stride 2, padding 1, groups 2 → out 16x16.
    c = cost(
        "aten::conv2d",
        [[2, 8, 32, 32], [16, 4, 3, 3], [16], [], [], [], []],
        [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "2"],
    )
    assert c is not None
    out_hw = 16 * 16
    assert c.flops == 2 * 2 * out_hw * (16 * 4 * 3 * 3)
    assert c.bytes == 4 * (2 * 8 * 32 * 32 + 16 * 4 * 9 + 16 + 2 * 16 * out_hw)
    assert c.op_class == "conv"


def test_convolution_with_dilation_and_defaults() -> None:
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    c = cost(
        "aten::convolution",
        [[1, 3, 10], [4, 3, 3], [], [], [], [], [], [], []],
        [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[1]", "[0]", "[2]", "False", "[0]", "1"],
    )
    assert c is not None
    out_len = (10 - 2 * 2 - 1) // 1 + 1  # 5
    assert c.flops == 2 * 1 * out_len * (4 * 3 * 3)


def test_convolution_backward_respects_output_mask() -> None:
    dims = [[2, 16, 16, 16], [2, 8, 16, 16], [16, 8, 3, 3], [], [], [], [], [], [], [], []]
    types = [
        F32,
        F32,
        F32,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
        "ScalarList",
    ]
    fwd = 2 * 2 * 16 * 16 * (16 * 8 * 9)

    def concrete(output_mask: str) -> list[str]:
        # bias sizes, stride, padding, dilation, transposed, output padding, groups, output mask
        return ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", output_mask]

    both = cost(
        "aten::convolution_backward",
        dims,
        types,
        concrete("[True, True, True]"),
    )
    weight_only = cost(
        "aten::convolution_backward",
        dims,
        types,
        concrete("[False, True, False]"),
    )
    assert both is not None and both.flops == 2 * fwd
    assert weight_only is not None and weight_only.flops == fwd


def test_sdpa_causal_halves_the_work() -> None:
    q = [4, 8, 128, 64]
    dims = [q, q, q, [], [], [], [], []]
    types = [BF16, BF16, BF16, "", "Scalar", "Scalar", "Scalar", ""]
    full = cost(
        "aten::scaled_dot_product_attention", dims, types, ["", "", "", "", "0.", "False", "", ""]
    )
    causal = cost(
        "aten::scaled_dot_product_attention", dims, types, ["", "", "", "", "0.", "True", "", ""]
    )
    expected = 2 * 4 * 8 * 128 * 128 * 64 * 2
    assert full is not None and full.flops == expected
    assert causal is not None and causal.flops == expected / 2
    assert full.bytes == 2 * 4 * (4 * 8 * 128 * 64)
    assert full.op_class == "attention" and full.dtype_class == "bf16"


def test_efficient_attention_internal_op_uses_bshd_layout() -> None:
    # _efficient_attention_forward takes [batch, seq, heads, dim]; custom_mask_type 1 = causal.
    q = [2, 256, 4, 32]
    dims = [q, q, q, [], [], [], [], [], [], [], [], [], [], []]
    types = [F32, F32, F32, "", "", "", "", "", "Scalar", "Scalar", "Scalar", "", "", ""]
    plain = cost(
        "aten::_efficient_attention_forward",
        dims,
        types,
        ["", "", "", "", "", "", "", "", "0.", "0", "True", "", "", ""],
    )
    masked = cost(
        "aten::_efficient_attention_forward",
        dims,
        types,
        ["", "", "", "", "", "", "", "", "0.", "1", "True", "", "", ""],
    )
    expected = 2 * 2 * 4 * 256 * 256 * 32 * 2
    assert plain is not None and plain.flops == expected
    assert masked is not None and masked.flops == expected / 2


def test_flash_attention_backward_is_two_and_a_half_forward() -> None:
    # Recomputed QKᵀ plus four gradient GEMMs: 5 GEMMs against forward's 2 (docs/bound.md).
    q = [2, 4, 64, 32]
    dims = [q, q, q, q, q, [2, 4, 64], [], [], [], [], [], [], [], [], []]
    types = [BF16] * 5 + [F32] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", ""]
    concrete = [""] * 11 + ["False"] + [""] * 3
    c = cost("aten::_scaled_dot_product_flash_attention_backward", dims, types, concrete)
    assert c is not None
    assert c.flops == 2.5 * (2 * 2 * 4 * 64 * 64 * 32 * 2)


def test_layer_norm_and_backward() -> None:
    x = [16, 128, 256]
    fwd = cost(
        "aten::layer_norm",
        [x, [], [256], [256], [], []],
        [F32, "ScalarList", F32, F32, "Scalar", "Scalar"],
    )
    assert fwd is not None
    numel = 16 * 128 * 256
    assert fwd.flops == 5 * numel
    assert fwd.bytes == 4 * (2 * numel + 2 * 256)
    bwd = cost(
        "aten::native_layer_norm_backward",
        [x, x, [], [16, 128, 1], [16, 128, 1], [256], [256], []],
        [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"],
    )
    assert bwd is not None and bwd.op_class == "norm"
    assert bwd.bytes > 3 * 4 * numel


def test_softmax_and_backward() -> None:
    f = cost("aten::_softmax", [[2048, 1024], [], []], [BF16, "Scalar", "Scalar"])
    assert f is not None and f.bytes == 2 * 2 * 2048 * 1024 and f.flops == 5 * 2048 * 1024
    b = cost(
        "aten::_log_softmax_backward_data",
        [[8, 10], [8, 10], [], []],
        [F32, F32, "Scalar", "Scalar"],
    )
    assert b is not None and b.bytes == 3 * 4 * 80 and b.flops == 4 * 80


def test_binary_elementwise_broadcasts() -> None:
    # [128, 16, 768] + [768]: output has the big shape; the bias is read once.
    c = cost("aten::add_", [[128, 16, 768], [768], []], [F32, F32, "Scalar"])
    out = 128 * 16 * 768
    assert c is not None
    assert c.flops == out
    assert c.bytes == 4 * (out + 768 + out)
    # A [4, 1] * [1, 5] product broadcasts to [4, 5].
    m = cost("aten::mul", [[4, 1], [1, 5]], [F32, F32])
    assert m is not None and m.flops == 20 and m.bytes == 4 * (4 + 5 + 20)


def test_out_variant_does_not_read_its_output() -> None:
    n = 1024
    c = cost("aten::add", [[n], [n], [], [n]], [F32, F32, "Scalar", F32])
    assert c is not None and c.bytes == 4 * 3 * n


def test_unary_and_fill() -> None:
    r = cost("aten::relu_", [[1000]], [F32])
    assert r is not None and r.bytes == 8000 and r.flops == 1000
    f = cost("aten::fill_", [[1000], []], [BF16, "Scalar"])
    assert f is not None and f.bytes == 2000


def test_activations_cost_more_than_one_flop_per_element() -> None:
    # SiLU: x / (1 + exp(-x)), 4 per element; GELU's backward (erf form), 12.
    s = cost("aten::silu", [[1000]], [F32])
    assert s is not None and s.flops == 4 * 1000 and s.bytes == 4 * 2 * 1000
    g = cost("aten::gelu_backward", [[1000], [1000], []], [F32, F32, "Scalar"], ["", "", "'none'"])
    assert g is not None and g.flops == 12 * 1000 and g.bytes == 4 * 3 * 1000


def test_cat_reads_and_writes_its_list_once_and_computes_nothing() -> None:
    c = cost("aten::cat", [[[4, 8], [2, 8]], []], ["TensorList", "Scalar"])
    assert c is not None and (c.flops, c.op_class) == (0.0, "copy")
    # 48 elements of float32 (a list's element size is not recorded): read once, written once
    assert c.bytes == c.list_bytes == 2 * 48 * 4


def test_reduction_sum_over_dims() -> None:
    c = cost(
        "aten::sum",
        [[2048, 1024], [], [], []],
        [F32, "ScalarList", "Scalar", ""],
        ["", "[0]", "True", ""],
    )
    assert c is not None
    assert c.flops == 2048 * 1024
    assert c.bytes == 4 * (2048 * 1024 + 1024)
    full = cost("aten::mean", [[10, 10]], [F32])
    assert full is not None and full.bytes == 4 * (100 + 1)


def test_embedding_forward_and_backward() -> None:
    f = cost(
        "aten::embedding",
        [[1024, 256], [16, 128], [], [], []],
        [F32, "long int", "Scalar", "Scalar", "Scalar"],
    )
    idx = 16 * 128
    assert f is not None and f.flops == 0
    assert f.bytes == idx * 8 + 2 * idx * 256 * 4
    b = cost(
        "aten::embedding_dense_backward",
        [[16, 128, 256], [16, 128], [], [], []],
        [F32, "long int", "Scalar", "Scalar", "Scalar"],
        ["", "", "1024", "-1", "False"],
    )
    assert b is not None and b.bytes == 4 * idx * 256 + 8 * idx + 4 * 1024 * 256
    # without the table's row count (no concrete inputs recorded): the weight gradient's
    # bytes are unknown, so left out, not taken as one row
    unknown = cost(
        "aten::embedding_dense_backward",
        [[16, 128, 256], [16, 128], [], [], []],
        [F32, "long int", "Scalar", "Scalar", "Scalar"],
    )
    assert unknown is not None and unknown.bytes == 4 * idx * 256 + 8 * idx


def test_copies_and_casts() -> None:
    c = cost("aten::copy_", [[4096], [4096], []], [BF16, F32, "Scalar"])
    assert c is not None and c.bytes == 4096 * (4 + 2) and c.flops == 0
    # aten::to with dtype code 15 (BFloat16) from float32.
    t = cost(
        "aten::_to_copy",
        [[100], [], [], [], [], [], []],
        [F32, "Scalar", "", "", "", "Scalar", ""],
        ["", "15", "", "", "", "False", ""],
    )
    assert t is not None and t.bytes == 100 * (4 + 2) and t.flops == 0
    k = cost("aten::clone", [[10, 10], []], [F32, "Scalar"])
    assert k is not None and k.bytes == 800 and k.flops == 0


def test_foreach_lists_of_shapes() -> None:
    shapes = [[4, 4], [4], [2, 3]]
    numel = 16 + 4 + 6
    c = cost(
        "aten::_foreach_addcmul_",
        [shapes, shapes, shapes, []],
        ["TensorList", "TensorList", "TensorList", "Scalar"],
    )
    assert c is not None
    assert c.flops == 2 * numel
    # addcmul_(v, g, g) as torch.optim calls it: the grad list is read once, not twice.
    assert c.bytes == (2 + 1) * numel * 4
    assert c.op_class == "optimizer"
    other = [[4, 4], [4], [3, 3]]
    d = cost(
        "aten::_foreach_addcmul_",
        [shapes, shapes, other, []],
        ["TensorList", "TensorList", "TensorList", "Scalar"],
    )
    assert d is not None and d.bytes == (3 + 1) * numel * 4


def test_single_tensor_addcmul_reads_a_squared_operand_once() -> None:
    c = cost("aten::addcmul_", [[8, 8], [8, 8], [8, 8], []], [F32, F32, F32, "Scalar"])
    assert c is not None and c.bytes == (2 + 1) * 64 * 4


def test_fused_adamw() -> None:
    shapes = [[8, 8], [8]]
    numel = 72
    lists = [shapes] * 4 + [[], [[], []]]
    c = cost(
        "aten::_fused_adamw_",
        [*lists, [], [], [], [], [], [], [], [], []],
        ["TensorList"] * 6 + ["Scalar"] * 9,
    )
    assert c is not None
    assert c.bytes == 7 * numel * 4
    assert c.flops == 14 * numel


def test_unknown_and_malformed_ops() -> None:
    assert cost("aten::empty", [[], []], ["ScalarList", "Scalar"]) is None
    assert cost("MyCustomOp", [[4, 4]], [F32]) is None
    assert op_cost("aten::mm", "not json", "[]") is None
    assert op_cost("aten::mm", None, None) is None
    assert cost("aten::mm", [[4, 4]], [F32]) is None  # missing second operand


def test_op_costs_parses_each_combination_once_and_joins_back() -> None:
    dims, types = json.dumps([[4, 8], [8, 2]]), json.dumps([F32, F32])
    events = pl.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "name": ["aten::mm", "aten::mm", "aten::empty", "aten::mm"],
            "kind": ["cpu_op", "cpu_op", "cpu_op", "cpu_op"],
            "input_dims": [dims, dims, "[[]]", None],
            "input_types": [types, types, '["ScalarList"]', None],
            "concrete_inputs": ['["",""]', '["",""]', '[""]', None],
        }
    )
    out = op_costs(events).sort("id")
    assert out["id"].to_list() == [1, 2]
    assert out["flops"].to_list() == [2 * 4 * 8 * 2] * 2


@given(
    st.lists(st.integers(1, 5), min_size=0, max_size=4),
    st.lists(st.integers(1, 5), min_size=0, max_size=4),
)
def test_broadcast_shape_is_symmetric_and_covers_inputs(a: list[int], b: list[int]) -> None:
    # Make the shapes compatible: where both have an axis and they differ, use 1 in b.
    b = list(b)
    for i in range(1, min(len(a), len(b)) + 1):
        if a[-i] != b[-i]:
            b[-i] = 1
    out = broadcast_shape([tuple(a), tuple(b)])
    assert out == broadcast_shape([tuple(b), tuple(a)])
    assert len(out) == max(len(a), len(b))
    assert math.prod(out) >= max(math.prod(a), math.prod(b))


@given(st.integers(1, 512), st.integers(1, 512), st.integers(1, 512))
def test_mm_flops_property(m: int, k: int, n: int) -> None:
    c = cost("aten::mm", [[m, k], [k, n]], [BF16, BF16])
    assert c is not None
    assert c.flops == 2 * m * k * n
    assert c.bytes == 2 * (m * k + k * n + m * n)


def test_kernel_costs_split_an_op_between_its_kernels_by_duration(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Hand-made trace: one aten::mm launching two kernels (3 µs and 1 µs), one memcpy."""
    mm_args = {
        "Input Dims": [[64, 64], [64, 64]],
        "Input type": [F32, F32],
        "Concrete Inputs": ["", ""],
    }
    events = [
        op("aten::mm", 10.0, 20.0, args=mm_args),
        launch("cudaLaunchKernel", 12.0, 2.0, 1),
        launch("cudaLaunchKernel", 16.0, 2.0, 2),
        launch("cudaMemcpyAsync", 40.0, 2.0, 3),
        kernel("gemm_kernel", 20.0, 3.0, 1),
        kernel("splitKreduce_kernel", 24.0, 1.0, 2),
        kernel(
            "Memcpy HtoD (Pageable -> Device)",
            45.0,
            1.0,
            3,
            cat="gpu_memcpy",
            extra={"bytes": 4096},
        ),
    ]
    trace = load(write_trace(tmp_path / "mm.json", events), cache=False)
    costs = (
        kernel_costs(trace)
        .join(trace.kernels.select("id", pl.col("name").cast(pl.String)), on="id")
        .sort("name")
    )
    by_name = {r["name"]: r for r in costs.iter_rows(named=True)}
    total = 2 * 64**3
    assert by_name["gemm_kernel"]["flops"] == pytest.approx(0.75 * total)
    assert by_name["splitKreduce_kernel"]["flops"] == pytest.approx(0.25 * total)
    assert by_name["gemm_kernel"]["cost_source"] == "op"
    memcpy = by_name["Memcpy HtoD (Pageable -> Device)"]
    assert (memcpy["bytes"], memcpy["flops"], memcpy["cost_source"]) == (4096, 0.0, "transfer")
