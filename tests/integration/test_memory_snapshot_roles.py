"""Sites of C++-only stacks, roles, the OOM's fixes and the compare title, on snapshots recorded
on an H200 by ``sample_traces/make_memory_snapshots_3.py`` (``stacks="all"``) and
``make_memory_snapshots_2.py`` (Python stacks); the shapes no recording has are synthesised."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from tests.snapshot_builder import MiB, SnapshotBuilder, stack
from traceinsight.analysis.snapshot.report import SnapshotReport, analyze_snapshot
from traceinsight.analysis.snapshot.sites import sites
from traceinsight.render.snapshot.html import render_html
from traceinsight.render.snapshot.markdown import render_markdown
from traceinsight.trace.snapshot.load import load_memory_snapshot

ALLOC = Path(__file__).resolve().parents[2] / "sample_traces" / "memory" / "alloc"
MEASURED = json.loads((ALLOC / "measured_3.json").read_text())["runs"]


@cache
def analysed(name: str) -> SnapshotReport:
    return analyze_snapshot(load_memory_snapshot(ALLOC / f"{name}.pickle.gz"))


def roles_at(frame: pl.DataFrame | None) -> dict[str, int]:
    assert frame is not None
    return {r["role"]: r["bytes"] for r in frame.iter_rows(named=True)}


def test_cpp_only_stacks_named_by_operation() -> None:
    snap = load_memory_snapshot(ALLOC / "cnn_default.pickle.gz")
    table = sites(snap)
    labels = set(table["site"].to_list())
    # 30 of its 177 stacks have no Python frame (the autograd engine's thread): none is left
    # as the unwinder's frame
    assert not any("torch::unwind" in s or s.endswith("[library]") for s in labels)
    assert "aten::convolution_backward in ConvolutionBackward0 [C++]" in labels
    assert "aten::cudnn_batch_norm_backward in CudnnBatchNormBackward0 [C++]" in labels
    peak = analysed("cnn_default").peak.sites
    assert peak is not None and not peak.filter(pl.col("site").str.contains("unwind")).height


def test_cpp_frames_folded_into_the_nearest_python_caller(tmp_path: Path) -> None:
    # Synthesised: C++ frames, then PyTorch's optimizer (Python, a library), no user frame.
    cpp = [
        {"filename": "??", "line": 0, "name": "torch::unwind::unwind()"},
        {"filename": "CUDACachingAllocator.cpp", "line": 0, "name": "c10::cuda::malloc()"},
        {"filename": "??", "line": 0, "name": "at::_ops::add::call(at::Tensor const&)"},
    ]
    optim = {
        "filename": "/usr/lib/python3.11/site-packages/torch/optim/sgd.py",
        "line": 410,
        "name": "_multi_tensor_sgd",
    }
    b = SnapshotBuilder()
    b.segment(20 * MiB)
    b.alloc(MiB, [*cpp, optim])
    b.alloc(MiB, cpp)
    got = set(sites(load_memory_snapshot(b.dump(tmp_path / "s.pickle")))["site"].to_list())
    assert got == {f"{optim['filename']}:410 (_multi_tensor_sgd) [library]", "aten::add [C++]"}


def test_roles_at_the_peak_of_a_resnet50() -> None:
    r = analysed("cnn_default")
    held = roles_at(r.peak.roles)
    # ResNet-50: 25,557,032 fp32 parameters (102,228,128 B) and 53,120 fp32 + 53 int64
    # batch-norm buffers; SGD's momentum is one fp32 buffer per parameter
    assert held["parameter"] == 102_228_128 + 53_120 * 4 + 53 * 8
    assert held["optimizer_state"] == 102_228_128
    assert max(held, key=lambda k: held[k]) == "activation"
    assert held["activation"] > 0.9 * r.peak.peak_allocated_bytes
    assert sum(held.values()) == r.peak.peak_allocated_bytes


def test_roles_with_python_stacks_only() -> None:
    # GPT-2 shaped, AdamW (two fp32 states per parameter); backward's allocations have no
    # stack (the autograd thread runs no Python)
    r = analyze_snapshot(load_memory_snapshot(ALLOC / "lm_default.pickle.gz"))
    held = roles_at(r.peak.roles)
    assert held["optimizer_state"] == 2 * held["parameter"]
    assert held["activation"] == max(held.values())


def test_real_oom_under_a_process_cap() -> None:
    r = analysed("oom_cap")
    o = r.oom
    facts = MEASURED["oom_cap"]
    assert "Tried to allocate 196.00 MiB" in facts["error"]
    # 30 OOM events: 29 caught (cuDNN retried smaller workspaces), the last one raised
    assert o.ooms == 30 and o.request_bytes == 196 * MiB
    assert o.limit == "process_cap" and o.reserved_bytes == facts["reserved_at_error_bytes"]
    assert abs(o.allocated_bytes - facts["allocated_at_error_bytes"]) < 0.01 * o.allocated_bytes
    held = roles_at(o.roles)
    assert max(held, key=lambda k: held[k]) == "activation"
    assert o.sites is not None
    mostly = dict(zip(o.sites["site"].to_list(), o.sites["role"].to_list(), strict=True))
    assert mostly["/root/make_memory_snapshots_3.py:82 (_model)"] == "parameter"
    assert mostly["/root/make_memory_snapshots_3.py:88 (train_step)"] == "activation"
    assert mostly["aten::mm in AddmmBackward0 [C++]"] == "gradient"
    # the cap is replayed at the most the process was granted: every setting runs out, as
    # 5.88 GiB allocated + 196 MiB > 6 GiB says, so no allocator setting is offered
    runs = r.allocator.runs
    assert runs is not None and runs["ooms"].min() > 0  # type: ignore[operator]
    assert abs(r.allocator.replay_error) < 0.05
    kinds = [f.kind for f in o.fixes]
    assert "allocator_setting" not in kinds and "expandable_segments" not in kinds
    check = next(f for f in o.fixes if f.kind == "checkpointing")
    assert check.covers and check.frees_bytes == held["activation"]
    assert o.fix is not None and o.fix.covers


@pytest.mark.parametrize("workload", ["cnn", "ms"])
def test_allocator_predictions_against_measured_runs(workload: str) -> None:
    r = analysed(f"{workload}_default")
    w = r.allocator
    assert w.runs is not None
    predicted = {row["settings"]: row for row in w.runs.iter_rows(named=True)}
    pairs = {
        "recorded: (defaults)": f"{workload}_default",
        "expandable_segments:True": f"{workload}_expandable",
        "max_split_size_mb:64": f"{workload}_maxsplit",
    }
    assert abs(w.replay_error) <= 0.05
    for setting, run in pairs.items():
        measured = MEASURED[run]
        got = predicted[setting]
        err = got["peak_reserved_bytes"] / measured["max_memory_reserved_bytes"] - 1
        assert abs(err) <= 0.10, (setting, err)
        assert got["cudamalloc_calls"] == pytest.approx(measured["segments_allocated"], rel=0.1)


def test_compare_titled_by_what_differs(tmp_path: Path) -> None:
    r = analyze_snapshot(
        load_memory_snapshot(ALLOC / "cnn_default.pickle.gz"),
        compare_with=load_memory_snapshot(ALLOC / "ms_default.pickle.gz"),
    )
    c = r.compare
    assert c is not None and (c.before_label, c.after_label, c.differs_by) == (
        "cnn",
        "ms",
        "file name",
    )
    assert render_markdown(r).startswith("# Memory compared: cnn vs ms (file name:")
    assert "<title>Memory compared: cnn vs ms" in render_html(r)
    assert c.to_dict()["title"].startswith("cnn vs ms")
    # the same program under two allocator settings: the settings label the runs
    b = SnapshotBuilder()
    b.segment(20 * MiB)
    b.alloc(MiB, stack("/home/user/train.py", 3, "main"))
    one = b.dump(tmp_path / "run.pickle")
    two = b.dump(tmp_path / "run2.pickle", settings={"expandable_segments": True})
    c2 = analyze_snapshot(load_memory_snapshot(one), compare_with=load_memory_snapshot(two)).compare
    assert c2 is not None and c2.differs_by == "allocator settings"
    assert (c2.before_label, c2.after_label) == ("(defaults)", "expandable_segments:True")


def test_html_stacks_memory_by_role() -> None:
    r = analysed("cnn_default")
    html = render_html(r)
    assert "memory over time by role" in html and "Allocated memory by role" in html
    t = r.timeline
    assert t is not None and t.role_series is not None
    assert t.roles[:3] == ("parameter", "gradient", "optimizer_state")
    # the stacked roles add up to allocated memory at every point
    totals = t.role_series.group_by("idx").agg(pl.col("live_bytes").sum()).sort("idx")
    joined = totals.join(t.points, on="idx")
    assert (joined["live_bytes"] == joined["allocated_bytes"]).all()
    md = render_markdown(r)
    assert "## Roles: what the memory held at the peak was for" in md
    assert "| optimizer state | 97.5 MiB |" in md
