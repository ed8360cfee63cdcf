"""FLOPs and bytes moved by aten ops, from the shapes and dtypes the profiler recorded.

Needs ``record_shapes=True``: Kineto then writes each op's ``Input Dims``, ``Input type``
and ``Concrete Inputs`` (kept as raw JSON text in the ``input_dims``, ``input_types`` and
``concrete_inputs`` columns). Conventions, chosen to match ``torch.utils.flop_counter``
where it counts an op at all:

- a multiply-add is 2 FLOPs; matmul-like ops count only their products (bias adds and
  alpha/beta scaling are left out, as flop_counter does);
- attention counts the two matmuls (QKᵀ and PV); a causal mask halves them (flop_counter
  does not halve, so causal ratios against it read 0.5); backward counts 2.5× forward
  (QKᵀ recomputed plus four gradient GEMMs, as the fused kernels and flop_counter do);
- convolution backward counts one forward-sized product per gradient it computes;
- elementwise ops count one FLOP per output element per arithmetic step, reductions one
  per input element, normalisations and softmax a small fixed number per element;
- bytes are the ideal traffic: every input read once and every output written once
  (caches, re-reads and tiling are ignored), so achieved bandwidth is a lower bound.

Shapes are parsed once per distinct (name, dims, types, concrete inputs) combination, which
stays small even in very large traces, and the costs are joined back to the ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.cost.args import (
    ASSUMED_LIST_DTYPE_BYTES,
    OpArgs,
    OpCost,
    broadcast_shape,
    dtype_bytes,
    dtype_class,
    loads_list,
)
from traceinsight.analysis.cost.formulas import cost_of
from traceinsight.analysis.device.peaks import path_class
from traceinsight.analysis.lib.lineage import NONE, climb, ids_at, parent_rows

__all__ = [
    "COST_COLUMNS",
    "KERNEL_COST_COLUMNS",
    "OpArgs",
    "OpCost",
    "broadcast_shape",
    "cost_of",
    "dtype_bytes",
    "dtype_class",
    "kernel_costs",
    "op_cost",
    "op_costs",
]


def op_cost(name: str, input_dims: str | None, input_types: str | None, concrete_inputs: str | None = None) -> OpCost | None:
    """Cost of one op from its raw Kineto argument text (JSON lists of dims, types, values)."""
    dims = loads_list(input_dims)
    types = loads_list(input_types)
    if dims is None or types is None:
        return None
    concrete = loads_list(concrete_inputs) or []
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
    "list_bytes": pl.Float64,
}
_KEYS = ["name", "input_dims", "input_types", "concrete_inputs"]


def op_costs(events: pl.DataFrame) -> pl.DataFrame:
    """One row per cpu_op whose cost is known: id, flops, bytes, dtype_class, op_class, note."""
    ops = (
        events.select("id", "kind", "name", "input_dims", "input_types", "concrete_inputs")
        .filter((pl.col("kind") == "cpu_op") & pl.col("input_dims").is_not_null())
        .select("id", pl.col("name").cast(pl.String), "input_dims", "input_types", "concrete_inputs")
    )
    if ops.height == 0:
        return pl.DataFrame(schema=COST_COLUMNS)
    combos = ops.select(_KEYS).unique()
    rows = []
    for name, dims, types, concrete in combos.iter_rows():
        cost = op_cost(name, dims, types, concrete)
        if cost is not None:
            rows.append(
                (name, dims, types, concrete, cost.flops, cost.bytes, cost.dtype_class, cost.op_class, cost.note, cost.list_bytes)
            )
    table = pl.DataFrame(
        rows,
        schema={
            "name": pl.String, "input_dims": pl.String, "input_types": pl.String, "concrete_inputs": pl.String,
            "flops": pl.Float64, "bytes": pl.Float64, "dtype_class": pl.String, "op_class": pl.String,
            "cost_note": pl.String, "list_bytes": pl.Float64,
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


def _nearest_costed(trace: Any, op_ids: pl.DataFrame, costed: pl.DataFrame) -> pl.DataFrame:
    """Per kernel (id, op_id): the innermost op at or above op_id that has a known cost.

    The innermost one is the most specific (``aten::mm`` rather than the ``aten::matmul``
    around it); an outer op's cost is used only by kernels none of its costed children
    launched. Climbs the event tree by array lookups, one level at a time for all kernels.
    """
    op_ids = op_ids.filter(pl.col("op_id").is_not_null())
    if op_ids.height == 0 or costed.height == 0:
        return pl.DataFrame(schema={"id": pl.Int64, "costed_op_id": pl.Int64})
    row = climb(trace, op_ids["op_id"], 0)[0]
    has_cost = np.zeros(trace.events.height, dtype=bool)
    costed_rows = climb(trace, costed["id"], 0)[0]
    has_cost[costed_rows[costed_rows >= 0]] = True
    found = np.full(row.size, NONE, dtype=np.int64)
    active = row >= 0
    while active.any():
        hit = active & has_cost[np.maximum(row, 0)]
        found[hit] = row[hit]
        active &= ~hit
        row = np.where(active, parent_rows(trace, row), NONE)
        active &= row >= 0
    return op_ids.select("id").with_columns(costed_op_id=ids_at(trace, found)).filter(pl.col("costed_op_id").is_not_null())


def kernel_costs(trace: Any) -> pl.DataFrame:
    """:func:`kernel_costs_of` the trace, computed once per trace."""
    return per_trace(trace, "kernel_costs", lambda: kernel_costs_of(trace))


def kernel_costs_of(trace: Any) -> pl.DataFrame:
    """FLOPs and bytes of each kernel/memcpy/memset (``KERNEL_COST_COLUMNS``).

    A kernel takes the cost of the nearest op above it that has one; an op that launched
    several kernels has its cost split among them by kernel duration. Memcpys and memsets
    move the bytes their events record. Kernels without either get no cost (null
    ``cost_source``) but keep their family, from which callers may guess a bound. The
    compute class follows the kernel's path: FP32 matmul-like work on tensor-core kernels is
    TF32, FP64 on tensor-core kernels (``sm90_xmma_gemm_f64f64``) is ``fp64_tc``.
    """
    from traceinsight.analysis.classify import with_classes
    from traceinsight.analysis.device import model as device_model

    kernels = trace.kernels.select("id", "name", pl.col("kind").cast(pl.String), "dur_ns", "op_id", "bytes")
    if kernels.height == 0:
        return pl.DataFrame(schema=KERNEL_COST_COLUMNS)
    vendor = device_model.from_trace(trace).vendor
    kernels = with_classes(kernels, "name", vendor=vendor)
    costs = op_costs(trace.events)
    is_kernel = pl.col("kind") == "kernel"
    nearest = _nearest_costed(trace, kernels.filter(is_kernel), costs)
    k = kernels.join(nearest, on="id", how="left").join(
        costs.rename({"id": "costed_op_id", "bytes": "op_bytes"}), on="costed_op_id", how="left"
    )
    # The element size of an op's TensorLists, from the first of its kernels whose name says
    # (the classifier's element size: OpaqueType<N>, else the size of the precision it reads).
    k = k.with_columns(
        pl.col("element_bytes").cast(pl.Float64).drop_nulls().first().over("costed_op_id").alias("_list_size")
    ).with_columns(
        (
            pl.col("op_bytes")
            + pl.col("list_bytes").fill_null(0.0) * (pl.col("_list_size").fill_null(ASSUMED_LIST_DTYPE_BYTES) / ASSUMED_LIST_DTYPE_BYTES - 1.0)
        ).alias("op_bytes")
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
        .when(matmul_like & pl.col("tensor_core") & (pl.col("dtype_class") == "fp32"))
        .then(pl.lit(path_class("fp32", tensor_core=True)))
        .when(matmul_like & pl.col("tensor_core") & (pl.col("dtype_class") == "fp64"))
        .then(pl.lit(path_class("fp64", tensor_core=True)))
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
