"""A run's graph replays merged with the trace(s) of their capture: each replayed kernel gets
the op (name, shapes, types) that launched its node while the graph was captured.

Serving engines (vLLM, SGLang, xDiT) capture their CUDA/HIP graphs once, at start-up, and
replay them for every batch; a trace of the serving run shows one launch call per replay and
kernels with no op above them. The capture trace holds those ops. Each distinct graph of the
run (its kernel-name sequence) is matched to a capture window with the same number of kernel
nodes: by the kernel names the capture's launch calls record (ROCm traces do), then by the
grids, and by position alone where neither is recorded (said so in the notes).

The merged trace keeps every event of the run. For each replayed kernel it adds the captured
op, and the outermost op around it when that differs, as ``cpu_op`` rows of zero duration at
the replay's launch call, on a thread of their own (``GRAPH_NODE_TID``) so that no host
timeline changes; the kernel's ``op_*`` and ``top_op_*`` columns point at them. The cost model,
the op tables, bound labels and the findings that read shapes then work inside the graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from traceinsight.analysis.lib.graph_nodes import capture_nodes, graph_kernels
from traceinsight.trace.model import Trace
from traceinsight.trace.schema import EVENT_COLUMNS, KIND_DTYPE

# The thread the captured ops are placed on: no profiler writes a thread id this large.
GRAPH_NODE_TID = 2**62
# A graph matches a capture window when at least this share of its kernel names agree.
MIN_NAME_MATCH = 0.9


@dataclass(frozen=True)
class GraphMatch:
    graph: int
    capture: int | None  # index into the concatenated captures' windows; None: no match
    file: str | None
    nodes: int
    by: str  # "names", "grids", "position", or why it did not match
    names_pct: float | None
    ties: int  # other windows that match as well, with different ops or shapes


@dataclass(frozen=True)
class CaptureMerge:
    """What the merge found: per graph, the capture window it took its ops from."""

    files: tuple[str, ...] = ()
    matches: tuple[GraphMatch, ...] = ()
    graph_kernel_ns: int = 0  # kernel time in graph replays
    kernel_ns: int = 0  # all kernel time
    merged_ns: int = 0  # graph kernel time whose node got a captured op
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def graph_pct(self) -> float:
        return 100.0 * self.graph_kernel_ns / self.kernel_ns if self.kernel_ns else 0.0

    @property
    def merged_pct(self) -> float:
        return 100.0 * self.merged_ns / self.graph_kernel_ns if self.graph_kernel_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "graphs": len(self.matches),
            "matched": sum(m.capture is not None for m in self.matches),
            "graph_kernel_ns": self.graph_kernel_ns,
            "kernel_ns": self.kernel_ns,
            "merged_ns": self.merged_ns,
            "graph_pct": round(self.graph_pct, 2),
            "merged_pct": round(self.merged_pct, 2),
            "matches": [m.__dict__ for m in self.matches],
            "notes": list(self.notes),
        }


def _windows(captures: list[tuple[str, Trace]]) -> pl.DataFrame:
    parts = []
    offset = 0
    for path, capture in captures:
        nodes = capture_nodes(capture)
        if nodes.height:
            parts.append(nodes.with_columns(pl.col("capture") + offset, file=pl.lit(path)))
            offset += int(nodes["capture"].max()) + 1  # type: ignore[arg-type]
    return pl.concat(parts) if parts else pl.DataFrame()


def _with_occurrence(frame: pl.DataFrame, group: str, name: str) -> pl.DataFrame:
    """``occ``: how many earlier nodes of the same group ran a kernel of the same name; a node
    is then known by (name, occ), which survives the reordering of independent branches that a
    replay may run in another order than they were captured."""
    return frame.sort(group, "node").with_columns(occ=pl.int_range(pl.len()).over(group, name).cast(pl.Int64))


def _match(graph: int, replay: pl.DataFrame, windows: pl.DataFrame) -> GraphMatch:
    """The capture window whose kernel nodes are this graph's: the most kernels matched by
    name (and occurrence), then the most grids equal, then the earliest. Without kernel names
    in the capture, a window of the same size, by position."""
    nodes = replay.height
    named = windows.filter(pl.col("kernel").is_not_null())
    if named.height:
        pairs = replay.select("name", "occ", pl.col("grid").alias("run_grid")).join(
            named.select("capture", "file", pl.col("kernel").alias("name"), "occ", "grid", "nodes"), on=["name", "occ"]
        )
        scores = (
            pairs.group_by("capture", "file", "nodes")
            .agg(
                names=pl.len() / nodes,
                grids=(pl.col("grid") == pl.col("run_grid")).sum() / pl.len(),
            )
            .filter((pl.col("names") >= MIN_NAME_MATCH) & (pl.col("names") * nodes >= MIN_NAME_MATCH * pl.col("nodes")))
            .with_columns(pl.col("grids").fill_null(-1.0))
            .sort(["names", "grids", "capture"], descending=[True, True, False])
        )
        if scores.height == 0:
            return GraphMatch(graph, None, None, nodes, "its kernel names match no capture", None, 0)
        by = "names"
    else:
        scores = (
            windows.filter(pl.col("nodes") == nodes)
            .group_by("capture", "file", "nodes")
            .agg(names=pl.lit(None, pl.Float64), grids=pl.lit(-1.0))
            .sort("capture")
        )
        if scores.height == 0:
            return GraphMatch(graph, None, None, nodes, f"no capture with {nodes} kernel nodes", None, 0)
        by = "position"
    best = scores.row(0, named=True)
    same_names = pl.col("names").is_null() if best["names"] is None else pl.col("names") == best["names"]
    tied = scores.filter(same_names & (pl.col("grids") == best["grids"]))
    ops = {
        int(c): tuple(w.sort("node").select("op_name", "input_dims").rows())
        for (c,), w in windows.filter(pl.col("capture").is_in(tied["capture"].implode())).partition_by("capture", as_dict=True).items()
    }
    ties = len({v for c, v in ops.items() if c != best["capture"] and v != ops.get(int(best["capture"]))})
    names_pct = None if best["names"] is None else round(100 * float(best["names"]), 1)
    return GraphMatch(graph, int(best["capture"]), str(best["file"]), nodes, by, names_pct, ties)


def merge_captures(run: Trace, captures: list[tuple[str, Trace]]) -> tuple[Trace, CaptureMerge]:
    """``run`` with each graph-replayed kernel given the op captured for its node, and what was
    matched. ``captures``: (path, trace) of each capture trace."""
    kernels = run.kernels.filter(pl.col("kind") == "kernel")
    kernel_ns = int(kernels["dur_ns"].sum())
    replayed = graph_kernels(run)
    files = tuple(path for path, _ in captures)
    if replayed.height == 0:
        return run, CaptureMerge(files, (), 0, kernel_ns, 0, ("the run replays no CUDA/HIP graph: nothing to merge",))
    windows = _windows(captures)
    graph_ns = int(replayed["dur_ns"].sum())
    if windows.height == 0:
        note = "no stream capture (StreamBeginCapture … EndCapture with kernel launches) in " + ", ".join(files)
        return run, CaptureMerge(files, (), graph_ns, kernel_ns, 0, (note,))
    replayed = _with_occurrence(replayed, "launch_id", "name")
    windows = _with_occurrence(windows, "capture", "kernel")
    first = replayed.group_by("graph").agg(pl.col("launch_id").min()).sort("graph")
    matches = []
    for graph, launch in first.iter_rows():
        replay = replayed.filter(pl.col("launch_id") == launch).sort("node")
        matches.append(_match(int(graph), replay, windows))
    found = pl.DataFrame(
        [(m.graph, m.capture, m.by) for m in matches if m.capture is not None],
        schema={"graph": pl.Int64, "capture": pl.Int64, "by": pl.String},
        orient="row",
    )
    ops = windows.select(
        "capture", "node", pl.col("kernel").alias("name"), "occ", "op_name", "input_dims", "input_types", "concrete_inputs", "top_op_name"
    )
    chosen = replayed.join(found, on="graph", how="inner")
    by_name = chosen.filter(pl.col("by") == "names").join(ops.drop("node"), on=["capture", "name", "occ"], how="inner")
    by_node = chosen.filter(pl.col("by") != "names").join(ops.drop("name", "occ"), on=["capture", "node"], how="inner")
    nodes = pl.concat([by_name, by_node], how="diagonal_relaxed").filter(pl.col("op_name").is_not_null())
    notes = _notes(matches)
    merged = _merged_trace(run, nodes) if nodes.height else run
    result = CaptureMerge(files, tuple(matches), graph_ns, kernel_ns, int(nodes["dur_ns"].sum()), notes)
    meta = replace(merged.meta, graph_capture=result.to_dict())
    return replace(merged, meta=meta), result


def _notes(matches: list[GraphMatch]) -> tuple[str, ...]:
    notes = []
    unmatched = [m for m in matches if m.capture is None]
    if unmatched:
        notes.append(
            f"{len(unmatched)} of {len(matches)} graphs matched no capture: "
            + "; ".join(f"graph {m.graph} ({m.nodes} kernels): {m.by}" for m in unmatched[:3])
        )
    blind = [m for m in matches if m.by == "position"]
    if blind:
        notes.append(
            f"{len(blind)} graph(s) matched by their kernel count alone (the capture records no kernel names or grids)"
        )
    tied = [m for m in matches if m.ties]
    if tied:
        notes.append(
            f"{len(tied)} graph(s) match captures with other ops or shapes as well (a graph captured for several "
            "batch sizes): the first capture's shapes are used"
        )
    return tuple(notes)


def _merged_trace(run: Trace, nodes: pl.DataFrame) -> Trace:
    """The run with a zero-length op row (and its outer op's, when another) per replayed
    kernel; the kernels point at them."""
    ev = run.events
    launches = run.kernels.select("id", "launch_id", "launch_ts_ns", "step").join(nodes.select("id"), on="id")
    nodes = nodes.join(launches, on=["id", "launch_id"], how="left")
    pid = ev.filter(pl.col("id").is_in(nodes["launch_id"].implode())).select("id", "pid")
    nodes = nodes.join(pid.rename({"id": "launch_id"}), on="launch_id", how="left")
    base = int(ev["id"].max() or 0) + 1  # type: ignore[arg-type]
    n = nodes.height
    nodes = nodes.with_columns(
        op_row_id=pl.int_range(n, dtype=pl.Int64) * 2 + base,
        top_row_id=pl.int_range(n, dtype=pl.Int64) * 2 + base + 1,
        has_top=pl.col("top_op_name").is_not_null() & (pl.col("top_op_name") != pl.col("op_name")),
    )

    def rows(id_col: str, name_col: str, parent: pl.Expr, depth: int, shapes: bool) -> pl.DataFrame:
        return nodes.select(
            pl.col(id_col).alias("id"),
            pl.col("launch_ts_ns").alias("ts_ns"),
            pl.lit(0, pl.Int64).alias("dur_ns"),
            pl.col("launch_ts_ns").alias("end_ns"),
            pl.col(name_col).alias("name"),
            pl.lit("cpu_op").alias("cat"),
            pl.lit("cpu_op").cast(KIND_DTYPE).alias("kind"),
            "pid",
            pl.lit(GRAPH_NODE_TID, pl.Int64).alias("tid"),
            parent.alias("parent"),
            pl.lit(depth, pl.Int32).alias("depth"),
            "step",
            *(
                [pl.col("input_dims"), pl.col("input_types"), pl.col("concrete_inputs")]
                if shapes
                else [pl.lit(None, pl.String).alias(c) for c in ("input_dims", "input_types", "concrete_inputs")]
            ),
            "has_top",
        )

    inner = rows("op_row_id", "op_name", pl.when(pl.col("has_top")).then(pl.col("top_row_id")), 0, True)
    inner = inner.with_columns(depth=pl.when(pl.col("has_top")).then(1).otherwise(0).cast(pl.Int32))
    outer = rows("top_row_id", "top_op_name", pl.lit(None, pl.Int64), 0, False).filter(pl.col("has_top"))
    added = pl.concat([outer, inner]).drop("has_top")
    added = added.with_columns([pl.lit(None).cast(t).alias(c) for c, t in EVENT_COLUMNS.items() if c not in added.columns])
    added = added.select([pl.col(c).cast(t) for c, t in EVENT_COLUMNS.items()])
    events = pl.concat([ev.select(list(EVENT_COLUMNS)).cast(EVENT_COLUMNS), added], how="vertical").sort("id")  # type: ignore[arg-type]
    links = nodes.select(
        "id",
        pl.col("op_row_id").alias("_op_id"),
        pl.col("op_name").alias("_op_name"),
        pl.when(pl.col("has_top")).then(pl.col("top_row_id")).otherwise(pl.col("op_row_id")).alias("_top_id"),
        pl.when(pl.col("has_top")).then(pl.col("top_op_name")).otherwise(pl.col("op_name")).alias("_top_name"),
    )
    k = run.kernels.join(links, on="id", how="left", maintain_order="left")
    schema = run.kernels.schema
    k = k.with_columns(
        op_id=pl.coalesce("_op_id", "op_id"),
        op_name=pl.coalesce(pl.col("_op_name"), pl.col("op_name").cast(pl.String)).cast(schema["op_name"]),
        top_op_id=pl.coalesce("_top_id", "top_op_id"),
        top_op_name=pl.coalesce(pl.col("_top_name"), pl.col("top_op_name").cast(pl.String)).cast(schema["top_op_name"]),
    ).select(list(schema))
    return replace(run, events=events, kernels=k)
