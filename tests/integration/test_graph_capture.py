"""Kernels inside graph replays, each given its graph and node, and merged with the trace of the
graphs' capture so that they get ops and shapes. Hand-made traces for the rules (written by
hand, not recorded), the serving engines' traces in ../shared for the proof."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceinsight as ti
from tests.handmade import kernel, op, write_trace
from traceinsight.analysis.cost.model import kernel_costs
from traceinsight.analysis.lib.graph_capture import GRAPH_NODE_TID, merge_captures
from traceinsight.analysis.lib.graph_nodes import capture_nodes, graph_kernels
from traceinsight.analysis.report import analyze
from traceinsight.trace.layout import is_capture_name, resolve
from traceinsight.trace.loader import load

TRACELENS = Path(__file__).resolve().parents[3] / "shared" / "third_party" / "tracelens"
PID, TID = 10, 10
GEMM, NORM, ACT = "gemm_kernel", "rms_norm_kernel", "silu_kernel"
BF16 = "c10::BFloat16"


def _launch(name: str, ts: float, corr: int, *, kernel_name: str | None = None, grid: list[int] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"correlation": corr}
    if kernel_name is not None:
        args["kernel"] = kernel_name
    if grid is not None:
        args["grid"] = grid
    return op(name, ts, 2, pid=PID, tid=TID, cat="cuda_runtime", args=args)


def _capture(path: Path, layers: list[tuple[int, list[tuple[str, str, str]]]], *, names: bool = True) -> Path:
    """One capture window per entry: (batch, [(op, kernel, dims)]): each op launches its kernel
    while the stream is captured, as vLLM's capture traces record it."""
    events: list[dict[str, Any]] = []
    ts, corr = 0.0, 1
    for batch, nodes in layers:
        events.append(_launch("cudaStreamBeginCapture", ts, corr))
        ts, corr = ts + 5, corr + 1
        for op_name, kernel_name, dims in nodes:
            events.append(op("model.layer", ts, 30, pid=PID, tid=TID, cat="cpu_op", args={"Input Dims": [[batch, 64]]}))
            shapes = json.loads(dims.replace("B", str(batch)))
            events.append(op(op_name, ts + 1, 20, pid=PID, tid=TID, args={"Input Dims": shapes, "Input type": [BF16] * len(shapes)}))
            events.append(_launch("cudaLaunchKernel", ts + 5, corr, kernel_name=kernel_name if names else None, grid=[batch, 1, 1]))
            ts, corr = ts + 40, corr + 1
        events.append(_launch("cudaStreamEndCapture", ts, corr))
        ts, corr = ts + 100, corr + 1
    return write_trace(path, events)


LAYER = [
    ("aten::mm", GEMM, "[[B,4096],[4096,4096]]"),
    ("my::rms_norm", NORM, "[[B,4096],[4096]]"),
    ("my::silu", ACT, "[[B,4096]]"),
]


def _run(path: Path, replays: int, order: list[str] | None = None, *, extra_eager: bool = True) -> Path:
    """``replays`` cudaGraphLaunch calls, each running the layer's kernels (in ``order``)."""
    events: list[dict[str, Any]] = []
    ts = 0.0
    corr = 100
    for _ in range(replays):
        events.append(op("execute_model", ts, 90, pid=PID, tid=TID, cat="user_annotation"))
        events.append(_launch("cudaGraphLaunch", ts + 1, corr))
        k_ts = ts + 10
        for name in order or [GEMM, NORM, ACT]:
            events.append(kernel(name, k_ts, 20 if name == GEMM else 5, corr))
            k_ts += 25
        ts, corr = ts + 100, corr + 1
    if extra_eager:
        events.append(op("aten::add", ts, 10, pid=PID, tid=TID, args={"Input Dims": [[8, 8], [8, 8]], "Input type": [BF16, BF16]}))
        events.append(_launch("cudaLaunchKernel", ts + 2, corr))
        events.append(kernel("add_kernel", ts + 10, 5, corr))
    return write_trace(path, events, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])


def test_graph_kernels_get_their_graph_and_node(tmp_path: Path) -> None:
    trace = load(_run(tmp_path / "run.json", 3), cache=False)
    g = graph_kernels(trace)
    assert g.height == 9 and g["graph"].unique().to_list() == [0]
    assert g.filter(pl.col("launch_id") == g["launch_id"].min()).sort("node")["name"].to_list() == [GEMM, NORM, ACT]
    assert set(g["nodes"].to_list()) == {3}
    # the eager kernel is in no graph
    assert "add_kernel" not in g["name"].to_list()


def test_two_graphs_are_told_apart_by_their_kernels(tmp_path: Path) -> None:
    a = load(_run(tmp_path / "a.json", 2), cache=False)
    b = load(_run(tmp_path / "b.json", 2, order=[GEMM, ACT]), cache=False)
    assert graph_kernels(a)["graph"].n_unique() == 1 and graph_kernels(b)["graph"].n_unique() == 1
    path = tmp_path / "ab.json"
    events = [*_events(tmp_path / "a.json"), *(_shift(e, 1000) for e in _events(tmp_path / "b.json", corr_offset=1000))]
    write_trace(path, events)
    both = graph_kernels(load(path, cache=False))
    assert both.group_by("graph").agg(pl.col("nodes").first()).sort("graph")["nodes"].to_list() == [3, 2]


def _events(path: Path, corr_offset: int = 0) -> list[dict[str, Any]]:
    events = json.loads(path.read_text())["traceEvents"]
    for e in events:
        if "correlation" in e.get("args", {}):
            e["args"]["correlation"] += corr_offset
    return list(events)


def _shift(event: dict[str, Any], us: float) -> dict[str, Any]:
    return {**event, "ts": event["ts"] + us}


def test_capture_nodes_carry_the_op_that_launched_them(tmp_path: Path) -> None:
    nodes = capture_nodes(load(_capture(tmp_path / "capture.json", [(8, LAYER), (32, LAYER)]), cache=False))
    assert nodes.height == 6 and nodes["capture"].unique().sort().to_list() == [0, 1]
    first = nodes.filter(pl.col("capture") == 0).sort("node")
    assert first["kernel"].to_list() == [GEMM, NORM, ACT]
    assert first["op_name"].to_list() == ["aten::mm", "my::rms_norm", "my::silu"]
    assert first["input_dims"][0] == "[[8,4096],[4096,4096]]"
    assert set(first["top_op_name"].to_list()) == {"model.layer"}


def test_merge_gives_graph_kernels_ops_shapes_and_costs(tmp_path: Path) -> None:
    run = load(_run(tmp_path / "run.json", 3), cache=False)
    capture = load(_capture(tmp_path / "capture.json", [(8, LAYER)]), cache=False)
    merged, result = merge_captures(run, [("capture.json", capture)])
    assert result.merged_pct == 100.0 and [m.by for m in result.matches] == ["names"]
    g = merged.kernels.filter(pl.col("name").cast(pl.String).is_in([GEMM, NORM, ACT]))
    assert g["op_name"].cast(pl.String).to_list().count("aten::mm") == 3
    assert set(g["top_op_name"].cast(pl.String).to_list()) == {"model.layer"}
    # one op row per replayed kernel (and its outer op), on their own thread, zero long
    added = merged.events.filter(pl.col("tid") == GRAPH_NODE_TID)
    assert added.height == 2 * 9 and int(added["dur_ns"].sum()) == 0
    assert merged.events["id"].is_unique().all()
    # the gemm's FLOPs come from the captured shapes: 2 x 8 x 4096 x 4096 per replay
    costs = kernel_costs(merged).join(merged.kernels.select("id", "name"), on="id")
    gemm = costs.filter(pl.col("name").cast(pl.String) == GEMM)
    assert gemm["flops"].to_list() == [2 * 8 * 4096 * 4096] * 3
    assert kernel_costs(run).join(run.kernels.select("id", "name"), on="id").filter(
        pl.col("name").cast(pl.String) == GEMM
    )["flops"].null_count() == 3
    # host timelines are untouched: the run's own events are all there, unchanged
    assert merged.events.filter(pl.col("tid") != GRAPH_NODE_TID).equals(run.events.select(merged.events.columns))


def test_reordered_branches_match_by_name_and_occurrence(tmp_path: Path) -> None:
    # a replay may run independent nodes in another order than they were captured
    run = load(_run(tmp_path / "run.json", 2, order=[NORM, GEMM, ACT]), cache=False)
    capture = load(_capture(tmp_path / "capture.json", [(8, LAYER)]), cache=False)
    merged, result = merge_captures(run, [("c", capture)])
    assert result.merged_pct == 100.0
    by_kernel = dict(merged.kernels.filter(pl.col("name").cast(pl.String) == NORM).select("name", "op_name").cast(pl.String).rows())
    assert by_kernel[NORM] == "my::rms_norm"


def test_repeated_kernels_are_told_apart_by_their_occurrence(tmp_path: Path) -> None:
    # two GEMM nodes of different shapes, and the replay runs the norm and the activation in
    # the other order: each GEMM keeps its own op's shapes, one op row per kernel
    layer = [
        ("aten::mm", GEMM, "[[B,4096],[4096,4096]]"),
        ("my::rms_norm", NORM, "[[B,4096],[4096]]"),
        ("my::silu", ACT, "[[B,4096]]"),
        ("aten::mm", GEMM, "[[B,4096],[4096,1024]]"),
    ]
    run = load(_run(tmp_path / "run.json", 2, order=[GEMM, ACT, NORM, GEMM]), cache=False)
    capture = load(_capture(tmp_path / "capture.json", [(8, layer)]), cache=False)
    merged, result = merge_captures(run, [("c", capture)])
    assert result.merged_pct == 100.0
    gemms = merged.kernels.filter(pl.col("name").cast(pl.String) == GEMM).sort("ts_ns").join(
        merged.events.select(pl.col("id").alias("op_id"), "input_dims"), on="op_id"
    ).sort("ts_ns")
    assert gemms["input_dims"].to_list() == ["[[8,4096],[4096,4096]]", "[[8,4096],[4096,1024]]"] * 2
    added = merged.events.filter((pl.col("tid") == GRAPH_NODE_TID) & (pl.col("depth") == 1))
    assert added.height == merged.kernels.join(graph_kernels(run).select("id"), on="id").height == 8


def test_the_batch_size_replayed_is_told_by_the_grid(tmp_path: Path) -> None:
    # the same graph captured for batch 8 and 32: names tie, grids tell them apart
    path = _run(tmp_path / "run.json", 2)
    events = _events(path)
    for e in events:
        if e.get("cat") == "kernel":
            e["args"]["grid"] = [32, 1, 1]
    write_trace(path, events)
    capture = load(_capture(tmp_path / "capture.json", [(8, LAYER), (32, LAYER)]), cache=False)
    merged, result = merge_captures(load(path, cache=False), [("c", capture)])
    assert [m.capture for m in result.matches] == [1] and not result.notes
    dims = merged.events.filter((pl.col("tid") == GRAPH_NODE_TID) & (pl.col("name").cast(pl.String) == "aten::mm"))["input_dims"]
    assert set(dims.to_list()) == {"[[32,4096],[4096,4096]]"}


def test_without_kernel_names_the_match_is_by_position_and_says_so(tmp_path: Path) -> None:
    run = load(_run(tmp_path / "run.json", 2), cache=False)
    capture = load(_capture(tmp_path / "capture.json", [(8, LAYER)], names=False), cache=False)
    _, result = merge_captures(run, [("c", capture)])
    assert [m.by for m in result.matches] == ["position"]
    assert any("kernel count alone" in n for n in result.notes)


def test_a_capture_of_other_graphs_matches_nothing_and_says_why(tmp_path: Path) -> None:
    run = load(_run(tmp_path / "run.json", 2), cache=False)
    other = [("aten::mm", "other_gemm", "[[B,8],[8,8]]"), ("my::silu", ACT, "[[B,8]]"), ("my::x", "x_kernel", "[[B]]")]
    capture = load(_capture(tmp_path / "capture.json", [(8, other)]), cache=False)
    merged, result = merge_captures(run, [("c", capture)])
    assert result.merged_ns == 0 and result.matches[0].capture is None
    assert "match no capture" in result.matches[0].by and result.notes
    assert merged.events.height == run.events.height


def test_a_run_without_graphs_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "eager.json"
    write_trace(path, [_launch("cudaLaunchKernel", 0, 1), kernel("k", 5, 5, 1)])
    run = load(path, cache=False)
    merged, result = merge_captures(run, [("c", load(_capture(tmp_path / "c.json", [(8, LAYER)]), cache=False))])
    assert merged is run and "no CUDA/HIP graph" in result.notes[0]


def test_capture_names_and_the_directory_layout(tmp_path: Path) -> None:
    assert is_capture_name("runs/graph_capture_rank_0.json.gz") and is_capture_name("capture_bs_32_rank0.json.gz")
    assert is_capture_name("out/capture_traces/rank0.json") and not is_capture_name("profile_trace_rank_0.json.gz")
    assert not is_capture_name("recaptured.json") and not is_capture_name("graph_execution.json.gz")
    _run(tmp_path / "graph_execution_rank_0.json", 2)
    _capture(tmp_path / "graph_capture_rank_0.json", [(8, LAYER)])
    layout = resolve(str(tmp_path))
    assert layout.kind == "trace" and layout.captures == (str(tmp_path / "graph_capture_rank_0.json"),)
    with pytest.warns(UserWarning, match="graph capture"):
        trace = ti.load(tmp_path, cache=False)
    assert trace.meta.graph_capture is not None and trace.meta.graph_capture["merged_pct"] == 100.0
    overview = analyze(trace, only=["overview", "kernels"]).sections
    assert overview["overview"].graph_capture["matched"] == 1  # type: ignore[attr-defined]
    assert overview["overview"].counts_by_kind["cpu_op"] == 1  # type: ignore[attr-defined]  # the run's own add
    graphs = overview["kernels"].graphs  # type: ignore[attr-defined]
    assert graphs["top_op"].to_list() == ["aten::mm"]


def test_analyze_cli_merges_the_capture_beside_the_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traceinsight.cli.app import app

    _run(tmp_path / "graph_execution.json", 2)
    _capture(tmp_path / "graph_capture_rank_0.json", [(8, LAYER)])
    result = CliRunner().invoke(app, ["analyze", str(tmp_path), "--full", "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "merged into the run" in result.output and "1 matched to a capture" in result.output
    explicit = CliRunner().invoke(
        app, ["analyze", str(tmp_path / "graph_execution.json"), "--capture", str(tmp_path / "graph_capture_rank_0.json"), "-f", "json", "--no-cache"]
    )
    assert explicit.exit_code == 0, explicit.output
    assert '"merged_pct": 100.0' in explicit.output
    md = CliRunner().invoke(app, ["analyze", str(tmp_path), "-f", "md", "--no-cache", "--only", "kernels"])
    assert md.exit_code == 0, md.output
    assert "| graph | launches | kernels |" in md.output and "`aten::mm` (" in md.output
    page = tmp_path / "report.html"
    html = CliRunner().invoke(app, ["analyze", str(tmp_path), "-f", "html", "-o", str(page), "--no-cache", "--only", "kernels"])
    assert html.exit_code == 0, html.output
    text = page.read_text()
    assert "Graphs replayed" in text and "largest op (from the capture)" in text and "aten::mm (" in text


# ---- serving engines' traces (../shared) ---------------------------------------------------

SERVING = [
    ("vllm_prefilldecode_piecewise", "graph_execution.json.gz", "graph_capture_rank_0.json.gz", 3),
    ("sglang_decode", "decode.json.gz", "capture_bs_32_rank0.json.gz", 1),
    ("xdit_flux_aiter_sage", "profile_trace_rank_0.json.gz", "capture_trace_rank_0.json.gz", 1),
]


@pytest.mark.skipif(not TRACELENS.is_dir(), reason="../shared/third_party is not beside the checkout")
@pytest.mark.parametrize(("folder", "run_name", "capture_name", "graphs"), SERVING)
def test_serving_runs_get_ops_and_shapes_inside_their_graphs(folder: str, run_name: str, capture_name: str, graphs: int) -> None:
    run = load(TRACELENS / folder / run_name, cache=False)
    merged, result = merge_captures(run, [(capture_name, load(TRACELENS / folder / capture_name, cache=False))])
    assert len(result.matches) == graphs and all(m.by == "names" and m.names_pct == 100.0 for m in result.matches)
    assert result.merged_pct == 100.0
    graph_kernels_ = merged.kernels.join(graph_kernels(run).select("id"), on="id")
    assert graph_kernels_["op_name"].null_count() == 0
    shaped = merged.events.filter((pl.col("tid") == GRAPH_NODE_TID) & pl.col("input_dims").is_not_null())
    assert shaped.height >= graph_kernels_.height * 0.9

    def costed_pct(trace: ti.Trace) -> float:
        c = kernel_costs(trace).filter(pl.col("cost_source").is_not_null()).join(trace.kernels.select("id", "dur_ns"), on="id")
        return 100.0 * float(c["dur_ns"].sum()) / float(trace.kernels["dur_ns"].sum())

    assert costed_pct(merged) > costed_pct(run) + 5


@pytest.mark.skipif(not TRACELENS.is_dir(), reason="../shared/third_party is not beside the checkout")
def test_vllm_replay_kernel_time_is_in_graph_nodes() -> None:
    # the proof: at least 95 % of the vLLM replay run's kernel time is attributed to a graph node
    with pytest.warns(UserWarning, match="graph capture"):
        trace = ti.load(TRACELENS / "vllm_prefilldecode_piecewise", cache=False)
    merge = trace.meta.graph_capture
    assert merge is not None and merge["graph_pct"] >= 95.0 and merge["merged_pct"] == 100.0
