"""Ops analysis: self time, op parents through annotations, inclusive GPU attribution,
CPU-heavy flags and grouping by shapes.

Most fixtures are hand-made Kineto-like traces (written by hand, not recorded), small enough
to work every expected number out on paper; the last tests check invariants on the samples.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tests.conftest import sample_names
from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections import ops
from traceinsight.render.sections.ops import render_terminal
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

OTHER_TID = 77


def _dims(*shapes: list[int]) -> dict[str, Any]:
    return {"Input Dims": list(shapes)}


def _tree_events() -> list[dict[str, Any]]:
    """ProfilerStep#1 > outer > inner > leaf(launch K1); inner launches K2 itself;
    outer > record_function "region" > under_annotation (launch K3); "lonely" has no kernels.

    Times in µs. Kernel durations: K1 40, K2 20, K3 10.
    """
    return [
        op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        op("outer", 10, 190, args=_dims([8, 8])),
        op("inner", 20, 80, args=_dims([8, 8])),
        op("leaf", 30, 20, args=_dims([8, 8])),
        launch("cudaLaunchKernel", 32, 4, 1),
        launch("cudaLaunchKernel", 60, 4, 2),
        op("region", 110, 80, cat="user_annotation"),
        op("under_annotation", 120, 60, args=_dims([4])),
        launch("cudaLaunchKernel", 130, 4, 3),
        op("lonely", 300, 500, args=_dims([])),
        kernel("K1", 60, 40, 1),
        kernel("K2", 110, 20, 2),
        kernel("K3", 200, 10, 3),
    ]


@pytest.fixture
def tree_trace(tmp_path: Path) -> Trace:
    return load(write_trace(tmp_path / "tree.json", _tree_events(), baseTimeNanoseconds=10**18), cache=False)


def _row(result: ops.OpsResult, name: str) -> dict[str, Any]:
    rows = result.ops.filter(pl.col("name") == name).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_self_time_subtracts_direct_children_only(tree_trace: Trace) -> None:
    r = ops.run(tree_trace, AnalysisConfig())
    us = 1000
    # outer: 190 - inner 80 - region annotation 80
    assert _row(r, "outer")["host_self_ns"] == 30 * us
    # inner: 80 - leaf 20 - its own launch call 4
    assert _row(r, "inner")["host_self_ns"] == 56 * us
    assert _row(r, "leaf")["host_self_ns"] == 16 * us
    assert _row(r, "under_annotation")["host_self_ns"] == 56 * us
    assert _row(r, "lonely")["host_self_ns"] == _row(r, "lonely")["host_total_ns"] == 500 * us


def test_gpu_time_self_and_inclusive(tree_trace: Trace) -> None:
    r = ops.run(tree_trace, AnalysisConfig())
    us = 1000
    expected = {
        # name: (gpu_self, gpu_total, kernels_self, kernels)
        "leaf": (40, 40, 1, 1),
        "inner": (20, 60, 1, 2),
        "under_annotation": (10, 10, 1, 1),
        # the record_function between outer and under_annotation does not break the chain
        "outer": (0, 70, 0, 3),
        "lonely": (0, 0, 0, 0),
    }
    for name, (gself, gtotal, kself, ktotal) in expected.items():
        row = _row(r, name)
        assert (row["gpu_self_ns"], row["gpu_total_ns"]) == (gself * us, gtotal * us), name
        assert (row["kernels_self"], row["kernels"]) == (kself, ktotal), name
    assert r.attributed_gpu_ns == 70 * us
    assert r.unattributed_gpu_ns == 0


def test_top_level_flags_sorting_and_ratio(tree_trace: Trace) -> None:
    r = ops.run(tree_trace, AnalysisConfig())
    top = {row["name"] for row in r.ops.filter(pl.col("top_level")).iter_rows(named=True)}
    assert top == {"outer", "lonely"}
    # sorted by inclusive GPU time, then host time
    assert r.ops["name"].to_list()[:3] == ["outer", "inner", "leaf"]
    # no GPU time: "lonely" comes last among the GPU-less ops by its larger host time
    no_gpu = r.ops.filter(pl.col("gpu_total_ns") == 0)["name"].to_list()
    assert no_gpu[0] == "lonely"
    assert _row(r, "inner")["gpu_cpu_ratio"] == pytest.approx(60 / 80)
    assert r.top_level_host_ns == (190 + 500) * 1000


def test_cpu_heavy_needs_low_ratio_and_enough_host_time(tree_trace: Trace) -> None:
    r = ops.run(tree_trace, AnalysisConfig())
    assert _row(r, "lonely")["cpu_heavy"]  # 500 µs on the host, no GPU work
    assert _row(r, "outer")["cpu_heavy"]  # 190 µs host, 70 µs GPU: ratio 0.37
    assert not _row(r, "leaf")["cpu_heavy"]  # ratio 2.0
    assert not _row(r, "under_annotation")["cpu_heavy"]  # 60 µs: under the host-time floor
    assert r.cpu_heavy_ops == int(r.ops["cpu_heavy"].sum())


def test_by_shapes_groups_on_raw_input_dims(tmp_path: Path) -> None:
    events = [
        op("aten::mm", 0, 10, args=_dims([2, 3], [3, 4])),
        op("aten::mm", 20, 10, args=_dims([2, 3], [3, 4])),
        op("aten::mm", 40, 30, args=_dims([64, 64], [64, 64])),
    ]
    trace = load(write_trace(tmp_path / "shapes.json", events), cache=False)
    plain = ops.run(trace, AnalysisConfig())
    assert plain.ops.height == 1 and plain.ops["calls"].item() == 3
    shaped = ops.run(trace, AnalysisConfig(by_shapes=True))
    assert shaped.by_shapes
    calls = dict(zip(shaped.ops["input_dims"].to_list(), shaped.ops["calls"].to_list(), strict=True))
    assert sorted(calls.values()) == [1, 2]
    assert {json.loads(k)[0][0] for k in calls} == {2, 64}


def test_by_shapes_without_shapes_says_why(tmp_path: Path) -> None:
    trace = load(write_trace(tmp_path / "noshapes.json", [op("aten::mm", 0, 10)]), cache=False)
    r = ops.run(trace, AnalysisConfig(by_shapes=True))
    assert not r.available and "record_shapes" in (r.reason or "")


def test_by_shapes_renders_the_shapes(sample_trace: Any) -> None:
    r = ops.run(sample_trace("mm_sweep_1024"), AnalysisConfig(by_shapes=True))
    assert r.available and r.ops["input_dims"].null_count() < r.ops.height
    out = io.StringIO()
    Console(file=out, width=160).print(render_terminal(r))
    assert "input dims" in out.getvalue() and "1024" in out.getvalue()


def test_threads_are_separate_trees(tmp_path: Path) -> None:
    # Same times on two threads: neither op may become the other's parent.
    events = [
        op("a", 0, 100),
        op("b", 10, 50, tid=OTHER_TID),
        op("c", 20, 10, tid=OTHER_TID),
    ]
    trace = load(write_trace(tmp_path / "threads.json", events), cache=False)
    tree = ops.op_tree(trace)
    parents = dict(zip(tree["name"].cast(pl.String), tree["op_parent"], strict=True))
    ids = dict(zip(tree["name"].cast(pl.String), tree["id"], strict=True))
    assert parents["a"] is None and parents["b"] is None
    assert parents["c"] == ids["b"]


def test_python_frames_are_not_children_of_ops(tmp_path: Path) -> None:
    events = [
        op("aten::add", 0, 100),
        op("torch/nn/modules/module.py(1): _call_impl", 10, 50, cat="python_function"),
    ]
    trace = load(write_trace(tmp_path / "py.json", events), cache=False)
    r = ops.run(trace, AnalysisConfig())
    assert _row(r, "aten::add")["host_self_ns"] == 100_000


def test_sparse_event_ids_give_the_same_answer(tree_trace: Trace) -> None:
    # Ids are row numbers from the loader; a frame with sparse ids takes another code path.
    k = 1_000_003
    events = tree_trace.events.with_columns(pl.col("id") * k, pl.col("parent") * k)
    kernels = tree_trace.kernels.with_columns(
        *[pl.col(c) * k for c in ("id", "launch_id", "op_id", "top_op_id", "annotation_id")]
    )
    sparse = dataclasses.replace(tree_trace, events=events, kernels=kernels)
    cfg = AnalysisConfig()
    assert ops.run(sparse, cfg).ops.equals(ops.run(tree_trace, cfg).ops)


def test_no_cpu_ops_is_unavailable(tmp_path: Path) -> None:
    trace = load(write_trace(tmp_path / "gpuonly.json", [kernel("k", 0, 5, 1)]), cache=False)
    r = ops.run(trace, AnalysisConfig())
    assert not r.available and r.reason
    json.dumps(r.to_dict(), allow_nan=False)


def test_cpu_only_trace_has_host_times_and_no_flags(tmp_path: Path) -> None:
    events = [op("aten::add", 0, 5000), op("aten::empty", 10, 20)]
    r = ops.run(load(write_trace(tmp_path / "cpu.json", events), cache=False), AnalysisConfig())
    assert r.available and not r.has_gpu
    assert r.cpu_heavy_ops == 0
    assert r.ops["gpu_cpu_ratio"].null_count() == r.ops.height
    json.dumps(r.to_dict(), allow_nan=False)


@pytest.mark.parametrize("name", sample_names())
def test_invariants_on_samples(name: str, sample_trace: Any) -> None:
    trace = sample_trace(name)
    r = ops.run(trace, AnalysisConfig())
    assert r.available
    t = r.ops
    assert (t["host_self_ns"] <= t["host_total_ns"]).all()
    assert (t["gpu_self_ns"] <= t["gpu_total_ns"]).all()
    assert (t["kernels_self"] <= t["kernels"]).all()
    # Every attributed kernel is counted once at top level: inclusive sums close.
    tree = ops.op_tree(trace)
    assert tree.height == r.op_calls
    host = ops.HostTree(trace.events)
    per_call = ops._gpu_by_op(host, tree, trace.kernels)
    assert int(per_call.filter(pl.col("top_level"))["gpu_total_ns"].sum()) == r.attributed_gpu_ns
    assert int(t["gpu_self_ns"].sum()) == r.attributed_gpu_ns
    json.dumps(r.to_dict(), allow_nan=False)
    out = io.StringIO()
    Console(file=out, width=120).print(render_terminal(r))
    assert "host total" in out.getvalue()


def test_train_eager_matmuls_carry_the_gpu_time(sample_trace: Any) -> None:
    r = ops.run(sample_trace("train_eager"), AnalysisConfig())
    top_self = r.ops.sort("gpu_self_ns", descending=True)["name"].head(3).to_list()
    assert {"aten::mm", "aten::addmm"} & set(top_self)
    assert r.ops.filter(pl.col("top_level")).height > 0


# ---- property: attribution on random op trees (generated, not recorded) --------------------

_node: st.SearchStrategy[tuple[Any, ...]] = st.deferred(
    lambda: st.tuples(
        st.integers(min_value=0, max_value=40),  # kernel µs launched by the node itself (0: none)
        st.booleans(),  # wrapped in a record_function annotation
        st.lists(_node, max_size=3),
    )
)


def _layout(tree: tuple[Any, ...], t: float, events: list[dict[str, Any]], expect: dict[str, Any], counter: list[int]) -> float:
    """Lay a node and its children out from time t (µs); record expected figures by name."""
    kernel_us, wrapped, children = tree
    counter[0] += 1
    name = f"op{counter[0]}"
    start = t
    if wrapped:
        t += 1
    op_start = t
    t += 1
    own_children_us = 0.0
    if kernel_us:
        corr = counter[0]
        events.append(launch("cudaLaunchKernel", t, 1, corr))
        events.append(kernel(f"k{corr}", 10_000 + 100 * corr, kernel_us, corr))
        own_children_us += 1
        t += 2
    total_kernel_us = kernel_us
    for child in children:
        t = _layout(child, t, events, expect, counter) + 1
        total_kernel_us += expect["_last_total"]
        own_children_us += expect["_last_span"]
    op_end = t
    events.append(op(name, op_start, op_end - op_start))
    if wrapped:
        events.append(op(f"region{counter[0]}", start, op_end + 1 - start, cat="user_annotation"))
        t = op_end + 1
    expect[name] = {
        "gpu_self_ns": kernel_us * 1000,
        "gpu_total_ns": total_kernel_us * 1000,
        "host_self_ns": round((op_end - op_start - own_children_us) * 1000),
    }
    expect["_last_total"] = total_kernel_us
    expect["_last_span"] = t - start
    return t


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(forest=st.lists(_node, min_size=1, max_size=3))
def test_property_attribution_on_random_trees(forest: list[tuple[Any, ...]], tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    expect: dict[str, Any] = {}
    counter = [0]
    t = 0.0
    for tree in forest:
        t = _layout(tree, t, events, expect, counter) + 5
    trace = load(write_trace(tmp_path / "random.json", events), cache=False)
    r = ops.run(trace, AnalysisConfig())
    got = {row["name"]: row for row in r.ops.iter_rows(named=True)}
    for name, figures in expect.items():
        if name.startswith("_"):
            continue
        for key, value in figures.items():
            assert got[name][key] == value, (name, key)
    top = r.ops.filter(pl.col("top_level"))
    assert int(top["gpu_total_ns"].sum()) == r.attributed_gpu_ns == int(trace.kernels["dur_ns"].sum())
