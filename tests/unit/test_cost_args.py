"""The cost model's reading of Kineto op arguments: element sizes by type name and by
c10::ScalarType code, compute classes, concrete values, broadcasting. Expected values are the
PyTorch definitions, written out here, not read from the code under test."""

from __future__ import annotations

import json

import pytest

from traceinsight.analysis.cost.args import (
    OpArgs,
    as_list,
    broadcast_shape,
    dtype_bytes,
    dtype_class,
    loads_list,
    parse_concrete,
)
from traceinsight.analysis.cost.model import op_cost

# Kineto "Input type" strings and their element sizes in bytes.
TYPE_BYTES = {
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
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float4_e2m1fn_x2": 1,
}
# c10::ScalarType codes: Byte, Char, Short, Int, Long, Half, Float, Double, ComplexHalf,
# ComplexFloat, ComplexDouble, Bool, BFloat16, Float8_e5m2, Float8_e4m3fn, Float8_e5m2fnuz,
# Float8_e4m3fnuz.
SCALAR_TYPE_BYTES = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 15: 2,
    23: 1, 24: 1, 25: 1, 26: 1,
}  # fmt: skip
TYPE_CLASS = {
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float4_e2m1fn_x2": "fp8",
    "double": "fp64",
    "signed char": "int8",
    "unsigned char": "int8",
    "float": "fp32",
    "c10::complex<float>": "fp32",
    "bool": "fp32",
}


@pytest.mark.parametrize(("type_name", "size"), sorted(TYPE_BYTES.items()))
def test_element_size_by_type_name(type_name: str, size: int) -> None:
    assert dtype_bytes(type_name) == size


@pytest.mark.parametrize("type_name", ["Scalar", "TensorList", "", "c10::Float16"])
def test_unknown_type_names_have_no_size(type_name: str) -> None:
    assert dtype_bytes(type_name) is None


@pytest.mark.parametrize(("code", "size"), sorted(SCALAR_TYPE_BYTES.items()))
@pytest.mark.parametrize(("source", "source_size"), [("float", 4), ("double", 8)])
def test_element_size_by_scalar_type_code(code: int, size: int, source: str, source_size: int) -> None:
    # aten::_to_copy of 100 elements to dtype ``code``: 100 × the source size read, 100 × size
    # written (two sources, so that an unknown code read as "same as the input" cannot pass).
    c = op_cost(
        "aten::_to_copy",
        json.dumps([[100], [], [], [], [], [], []]),
        json.dumps([source, "Scalar", "", "", "", "Scalar", ""]),
        json.dumps(["", str(code), "", "", "", "False", ""]),
    )
    assert c is not None and c.bytes == 100 * source_size + 100 * size
    assert c.list_bytes == 0.0


@pytest.mark.parametrize(("type_name", "cls"), sorted(TYPE_CLASS.items()))
def test_compute_class(type_name: str, cls: str) -> None:
    assert dtype_class(type_name) == cls


def test_concrete_values() -> None:
    assert parse_concrete("") is None and parse_concrete("  ") is None
    assert parse_concrete("True") is True and parse_concrete("False") is False
    assert parse_concrete("[]") == [] and parse_concrete("[1, 2]") == [1, 2]
    assert parse_concrete("3") == 3 and parse_concrete("2.5") == 2.5
    assert parse_concrete("'mean'") == "mean"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [7, 7, 7]),
        (True, [1, 1, 1]),
        (2, [2, 2, 2]),
        (2.9, [2, 2, 2]),
        ([5], [5, 5, 5]),
        ([1, 2], [1, 2, 7]),
        ([1, 2, 3, 4], [1, 2, 3]),
        ([], [7, 7, 7]),
        ("x", [7, 7, 7]),
        ([True, False], [7, 7, 7]),
    ],
)
def test_as_list(value: object, expected: list[int]) -> None:
    assert as_list(value, 3, 7) == expected


def test_as_list_pads_to_length() -> None:
    assert as_list([1, 2], 5, 7) == [1, 2, 7, 7, 7]


@pytest.mark.parametrize(
    ("shapes", "out"),
    [
        ([(3, 1), (1, 4)], (3, 4)),
        ([(5,), (2, 1)], (2, 5)),
        ([(0,), (1,)], (0,)),
        ([(1, 1), (1,)], (1, 1)),
        ([], ()),
    ],
)
def test_broadcast_shape(shapes: list[tuple[int, ...]], out: tuple[int, ...]) -> None:
    assert broadcast_shape(shapes) == out


def test_loads_list() -> None:
    assert loads_list(None) is None and loads_list("") is None
    assert loads_list("[1, nan, inf]") == [1, 0, 0]
    assert loads_list("{}") is None and loads_list("not json") is None


def test_op_args_positions() -> None:
    args = OpArgs(
        dims=[[2, 3], [[4, 5], [6, "x"], 7], [], [8]],
        types=["float", "TensorList", "Scalar", "c10::Half"],
        concrete=["", "", "0.5"],
    )
    assert args.tensor(0) is not None and args.tensor(0).nbytes == 24  # type: ignore[union-attr]
    assert args.tensor(2) is None  # a Scalar
    assert args.tensor(3) is not None and args.tensor(3).nbytes == 16  # type: ignore[union-attr]
    assert args.tensor(4) is None  # past the end
    assert args.tensor_list(1) == [(4, 5)]
    assert args.tensor_list(0) == []  # a shape, not a list of shapes
    assert args.tensor_list(9) == []
    assert args.tensor_list_positions() == [1]
    assert args.value(2) == 0.5 and args.value(3) is None
    # An element type the table does not know counts 4 bytes; a position with a shape but no
    # type is no tensor.
    odd = OpArgs(dims=[[10], [3]], types=["c10::Float7"], concrete=[])
    assert odd.tensor(0) is not None and odd.tensor(0).nbytes == 40  # type: ignore[union-attr]
    assert odd.tensor(1) is None
    short = OpArgs(dims=[[10]], types=["float", "float", "float"], concrete=[])
    assert short.tensor(1) is None and short.tensor(2) is None  # types without shapes
