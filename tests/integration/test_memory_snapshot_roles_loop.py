"""Memory made before the training loop is the model's (parameters and buffers), not memory
kept from earlier iterations: told by when it was allocated (before the first iteration) and
that it lives on, not by the name of the function that made it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tests.snapshot_builder import MiB, SnapshotBuilder, stack
from traceinsight.analysis.snapshot.report import analyze_snapshot
from traceinsight.trace.snapshot.load import load_memory_snapshot

HANDMADE = (
    Path(__file__).resolve().parents[2]
    / "sample_traces"
    / "memory"
    / "handmade_train_oom.pickle"
)


def _roles_by_site(frame: pl.DataFrame | None) -> dict[str, str]:
    assert frame is not None
    return dict(zip(frame["site"].to_list(), frame["role"].to_list(), strict=True))


def test_the_model_built_before_the_loop_is_not_kept() -> None:
    # 1.25 GiB of weights made in __init__ (a stack under a module's call) before the first
    # step, then 10 steps keeping 48 MiB each in a list, then the OOM
    r = analyze_snapshot(load_memory_snapshot(HANDMADE))
    o = r.oom
    mostly = _roles_by_site(o.sites)
    assert mostly["/home/user/model.py:14 (__init__)"] == "parameter"
    assert mostly["/home/user/train.py:57 (train_step)"] == "kept"
    assert o.roles is not None
    held = {row["role"]: row["bytes"] for row in o.roles.iter_rows(named=True)}
    assert held["parameter"] == 1280 * MiB
    assert held["kept"] == 9 * 48 * MiB  # the nine whole steps' logits; the tenth is the step's own
    texts = [f.text for f in o.fixes]
    assert not any("model.py:14" in t for t in texts)
    kept_fix = next(f for f in o.fixes if f.kind == "free_kept")
    assert "/home/user/train.py:57 (train_step)" in kept_fix.text
    assert kept_fix.frees_bytes == 9 * 48 * MiB
    # the activations of each step, made before the step's marker allocation and freed by the
    # backward after it, were saved for that backward: never kept
    peak = r.peak.roles
    assert peak is not None and "kept" in peak["role"].to_list()
    peak_bytes = {row["role"]: row["bytes"] for row in peak.iter_rows(named=True)}
    assert peak_bytes["kept"] == 8 * 48 * MiB + 48 * MiB
    assert peak_bytes["activation"] >= 4 * 384 * MiB


def _loop(b: SnapshotBuilder, steps: int) -> None:
    for _ in range(steps):
        acts = [
            b.alloc(16 * MiB, stack("/home/user/model.py", 31, "block", forward=True))
            for _ in range(2)
        ]
        loss = b.alloc(1 * MiB, stack("/home/user/train.py", 57, "train_step"))
        for addr in [*acts, loss]:
            b.free(addr)


def test_a_loop_seen_from_its_middle(tmp_path: Path) -> None:
    # Synthesised (no recording has it): weights made outside any forward, then a loop whose
    # marker allocation comes in the middle of each step; the first step's activations come
    # before the first marker and are freed by its backward after it.
    b = SnapshotBuilder()
    b.segment(1024 * MiB)
    weights = [
        {"filename": "/home/user/train.py", "line": 12, "name": "load_weights"},
        {"filename": "/home/user/train.py", "line": 99, "name": "main"},
    ]
    for _ in range(3):
        b.alloc(32 * MiB, weights)
    _loop(b, 8)
    path = tmp_path / "loop.pickle"
    b.dump(path)
    r = analyze_snapshot(load_memory_snapshot(path))
    assert r.peak.sites is not None
    roles = r.peak.roles
    assert roles is not None
    at_peak = {row["role"]: row["bytes"] for row in roles.iter_rows(named=True)}
    assert at_peak.get("parameter") == 96 * MiB
    assert "kept" not in at_peak
    assert at_peak.get("activation") == 33 * MiB  # two activations and the loss, freed in backward


def test_smaller_batch_says_by_how_much_and_on_what_assumption() -> None:
    # the ResNet-50 that ran out of memory under a 6 GiB cap (recorded on an H200)
    path = HANDMADE.parent / "alloc" / "oom_cap.pickle.gz"
    o = analyze_snapshot(load_memory_snapshot(path)).oom
    assert o.roles is not None
    held = {row["role"]: row["bytes"] for row in o.roles.iter_rows(named=True)}
    scaling = held.get("activation", 0) + held.get("temporary", 0)
    batch = next(f for f in o.fixes if f.kind == "smaller_batch")
    assert batch.covers and batch.frees_bytes == o.shortfall_bytes
    ratio = (scaling - o.shortfall_bytes) / scaling
    shown = float(batch.text.split("batch × ")[1].split(" ")[0])
    # rounded down to the hundredth: the batch given fits under the assumption
    assert ratio - 0.01 < shown <= ratio
    assert "assuming activation and temporary memory proportional to the batch" in batch.text
