"""allocating_ops: which calls of an operator allocated, and what a cached call of it costs."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.price.alloc_cost import allocating_ops


def _events(rows: list[tuple[int, int | None, str, int, int]]) -> pl.DataFrame:
    """(id, parent, name, ts_us, dur_us) on one thread; cpu_ops with one shape, runtime calls."""
    return pl.DataFrame(
        {
            "id": [r[0] for r in rows],
            "parent": [r[1] for r in rows],
            "name": [r[2] for r in rows],
            "kind": ["runtime" if r[2].startswith("cuda") else "cpu_op" for r in rows],
            "pid": [1] * len(rows),
            "tid": [1] * len(rows),
            "ts_ns": [r[3] * 1000 for r in rows],
            "dur_ns": [r[4] * 1000 for r in rows],
            "end_ns": [(r[3] + r[4]) * 1000 for r in rows],
            "input_dims": ["[[4,256]]"] * len(rows),
        },
        schema_overrides={"parent": pl.Int64},
    )


def test_an_op_that_allocated_through_a_nested_op_is_not_a_warm_call() -> None:
    # aten::pow calls an inner aten::pow (same shapes) that allocates: 100 µs of cudaMalloc in
    # a 130 µs inner call inside a 150 µs outer one; two cached pows elsewhere take 10 µs
    events = _events([
        (1, None, "aten::pow", 0, 150),
        (2, 1, "aten::pow", 10, 130),
        (3, 2, "cudaMalloc", 20, 100),
        (4, None, "aten::pow", 200, 10),
        (5, None, "aten::pow", 300, 10),
    ])
    calls = events.filter(pl.col("name") == "cudaMalloc")
    slow = allocating_ops(events, calls)
    # the inner call is priced against the cached ones (10 µs), not against a mean that takes
    # the outer call (150 µs) for a cached one
    assert slow.height == 1
    row = slow.row(0, named=True)
    assert row["warm_ns"] == 10_000
    assert row["factor"] == 10_000 / (130_000 - 100_000)
