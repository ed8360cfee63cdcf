"""Kernels inside CUDA/HIP graph replays, each given its graph and node, and the nodes of a
graph capture trace, each given the host op that launched it while the graph was captured.

A graph launch (``cudaGraphLaunch``/``hipGraphLaunch``) shares one correlation id with every
kernel it replays, so the launch correlation already ties each kernel to its replay; the
traces name neither the graph nor the node. Graphs are told apart by the sequence of kernel
names one replay runs (its *signature*), and a kernel's node is its position in that replay
(by start time). A capture trace (vLLM and SGLang write one per captured batch size) records,
between ``StreamBeginCapture`` and ``StreamEndCapture``, the launch call of every node with the
op around it: the op's name, shapes and types are what the replay's kernels lack.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceinsight.analysis.lib.host_names import GRAPH_LAUNCH_PATTERN
from traceinsight.trace.link import host_context
from traceinsight.trace.model import Trace

GRAPH_KERNEL_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "launch_id": pl.Int64,
    "graph": pl.Int64,  # numbered in the order the graphs were first replayed
    "node": pl.Int64,  # position in its replay, by start time
    "nodes": pl.Int64,  # kernels in that replay
    "name": pl.String,
    "dur_ns": pl.Int64,
    "grid": pl.List(pl.Int64),
}
CAPTURE_NODE_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "capture": pl.Int64,  # the capture window, in time order
    "node": pl.Int64,
    "nodes": pl.Int64,
    "kernel": pl.String,  # the launch call's kernel name where the trace records it (ROCm)
    "grid": pl.List(pl.Int64),
    "launch_id": pl.Int64,
    "op_id": pl.Int64,
    "op_name": pl.String,
    "input_dims": pl.String,
    "input_types": pl.String,
    "concrete_inputs": pl.String,
    "top_op_name": pl.String,
}
_BEGIN = r"^(cuda|hip|cu)StreamBeginCapture"
_END = r"^(cuda|hip|cu)StreamEndCapture"
# Calls that add a kernel node while a stream is captured.
_KERNEL_LAUNCH = r"(?i)^(cuda|hip|cu)(Ext)?(Module)?Launch(Cooperative)?Kernel"


def graph_kernels(trace: Trace) -> pl.DataFrame:
    """One row per kernel replayed by a graph launch (``GRAPH_KERNEL_COLUMNS``)."""
    k = trace.kernels.filter(
        (pl.col("kind") == "kernel")
        & pl.col("launch_id").is_not_null()
        & pl.col("launch_name").cast(pl.String).str.contains(GRAPH_LAUNCH_PATTERN).fill_null(False)
    ).select("id", "launch_id", pl.col("name").cast(pl.String), "dur_ns", "ts_ns", "grid")
    if k.height == 0:
        return pl.DataFrame(schema=GRAPH_KERNEL_COLUMNS)
    k = k.sort(["launch_id", "ts_ns", "id"]).with_columns(
        node=pl.int_range(pl.len()).over("launch_id").cast(pl.Int64),
        nodes=pl.len().over("launch_id").cast(pl.Int64),
    )
    launches = k.group_by("launch_id", maintain_order=True).agg(
        signature=pl.col("name").str.join("\n").hash(), first_ts_ns=pl.col("ts_ns").min()
    )
    graphs = (
        launches.group_by("signature")
        .agg(pl.col("first_ts_ns").min())
        .sort("first_ts_ns", "signature")
        .with_columns(graph=pl.int_range(pl.len()).cast(pl.Int64))
    )
    k = k.join(launches.select("launch_id", "signature"), on="launch_id").join(
        graphs.select("signature", "graph"), on="signature"
    )
    return k.select([pl.col(c).cast(t) for c, t in GRAPH_KERNEL_COLUMNS.items()]).sort("launch_id", "node")


def capture_nodes(capture: Trace) -> pl.DataFrame:
    """One row per kernel node launched inside a stream capture of ``capture``, with the op
    that launched it (innermost cpu_op) and the outermost op around it
    (``CAPTURE_NODE_COLUMNS``)."""
    ev = capture.events
    name = pl.col("name").cast(pl.String)
    marks = ev.filter(name.str.contains(_BEGIN) | name.str.contains(_END)).select(
        "pid", "tid", "ts_ns", "end_ns", begin=name.str.contains(_BEGIN)
    ).sort("ts_ns")
    windows = (
        marks.with_columns(next_begin=pl.col("begin").shift(-1).over("pid", "tid"), end=pl.col("end_ns").shift(-1).over("pid", "tid"))
        .filter(pl.col("begin") & (pl.col("next_begin") == False))  # noqa: E712 (a column, not a bool)
        .select("pid", "tid", pl.col("ts_ns").alias("start_ns"), "end")
        .sort("start_ns")
        .with_columns(capture=pl.int_range(pl.len()).cast(pl.Int64))
    )
    if windows.height == 0:
        return pl.DataFrame(schema=CAPTURE_NODE_COLUMNS)
    launches = ev.filter(pl.col("kind").is_in(["runtime", "driver"]) & name.str.contains(_KERNEL_LAUNCH)).select(
        pl.col("id").alias("launch_id"), "pid", "tid", "ts_ns", pl.col("launch_kernel").cast(pl.String).alias("kernel"), "grid"
    ).sort("ts_ns")
    inside = launches.join_asof(windows, left_on="ts_ns", right_on="start_ns", by=["pid", "tid"], strategy="backward", check_sortedness=False).filter(
        pl.col("ts_ns") <= pl.col("end")
    )
    if inside.height == 0:
        return pl.DataFrame(schema=CAPTURE_NODE_COLUMNS)
    nodes = inside.sort("capture", "ts_ns", "launch_id").with_columns(
        node=pl.int_range(pl.len()).over("capture").cast(pl.Int64),
        nodes=pl.len().over("capture").cast(pl.Int64),
    )
    # the loader's nesting, as row numbers, climbed by the linker's own walk
    ids = ev["id"].to_numpy()
    row_of = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    row_of[ids] = np.arange(ids.size)
    parent = ev["parent"].to_numpy(allow_copy=True)
    has_parent = ~ev["parent"].is_null().to_numpy()
    parent_row = np.where(has_parent, row_of[np.where(has_parent, parent, 0).astype(np.int64)], -1)
    op_row, top_row, _ = host_context(
        parent_row, (ev["kind"] == "cpu_op").to_numpy(), np.zeros(ev.height, dtype=bool), row_of[nodes["launch_id"].to_numpy()]
    )

    def at(column: str, rows: np.ndarray) -> pl.Series:
        valid = rows >= 0
        values = ev[column].gather(np.where(valid, rows, 0)).cast(pl.String)
        return values.zip_with(pl.Series(valid), pl.Series([None] * len(rows), dtype=pl.String)).alias(column)

    return pl.DataFrame(
        [
            nodes["capture"],
            nodes["node"],
            nodes["nodes"],
            nodes["kernel"],
            nodes["grid"],
            nodes["launch_id"],
            pl.Series("op_id", ids[np.maximum(op_row, 0)]).zip_with(
                pl.Series(op_row >= 0), pl.Series([None] * len(op_row), dtype=pl.Int64)
            ),
            at("name", op_row).alias("op_name"),
            at("input_dims", op_row),
            at("input_types", op_row),
            at("concrete_inputs", op_row),
            at("name", top_row).alias("top_op_name"),
        ]
    ).select([pl.col(c).cast(t) for c, t in CAPTURE_NODE_COLUMNS.items()])
