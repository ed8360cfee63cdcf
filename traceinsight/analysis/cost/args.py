"""Kineto op arguments as the cost model reads them: dtypes and their sizes, tensors with
shapes, concrete (non-tensor) values, and the cost record a formula returns."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "str", "Device", "Layout"})
# TensorList arguments carry no dtype in Kineto's "Input type" (just "TensorList"): until
# the launched kernels tell the element size, float32 is assumed.
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
        if type_name in NON_TENSOR_TYPES or not isinstance(dims, list):
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
    # Part of ``bytes`` counted at ASSUMED_LIST_DTYPE_BYTES per element because Kineto
    # records a TensorList's type as just "TensorList"; rescaled once the element size is
    # known from the kernels the op launched (see costmodel.list_itemsize_expr).
    list_bytes: float = 0.0


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


def as_list(value: Any, n: int, default: int) -> list[int]:
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


def loads_list(text: str | None) -> list[Any] | None:
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
