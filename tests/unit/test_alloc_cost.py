"""allocating_ops: which calls of an operator allocated, and what a cached call of it costs
(hand-made trace, not recorded by a profiler)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tests.handmade import launch, op, write_trace
from traceinsight.analysis.findings.price.alloc_cost import allocating_ops
from traceinsight.trace.loader import load

SHAPES = {"Input Dims": [[4, 256]]}


def test_an_op_that_allocated_through_a_nested_op_is_not_a_warm_call(tmp_path: Path) -> None:
    # aten::pow calls an inner aten::pow (same shapes) that allocates: 100 µs of cudaMalloc in
    # a 130 µs inner call inside a 150 µs outer one; two cached pows elsewhere take 10 µs
    path = write_trace(tmp_path / "t.json", [
        op("aten::pow", 0, 150, args=SHAPES),
        op("aten::pow", 10, 130, args=SHAPES),
        launch("cudaMalloc", 20, 100, 1),
        op("aten::pow", 200, 10, args=SHAPES),
        op("aten::pow", 300, 10, args=SHAPES),
    ])
    trace = load(path, cache=False)
    calls = trace.events.filter(pl.col("name").cast(pl.String) == "cudaMalloc")
    slow = allocating_ops(trace, calls)
    # the inner call is priced against the cached ones (10 µs), not against a mean that takes
    # the outer call (150 µs) for a cached one
    assert slow.height == 1
    row = slow.row(0, named=True)
    assert row["warm_ns"] == 10_000
    assert row["factor"] == 10_000 / (130_000 - 100_000)
