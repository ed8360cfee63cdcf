"""Snapshots recorded on an H200 by sample_traces/make_memory_snapshots.py: each answer against
what the script did (its .json beside each pickle says what that was)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from traceinsight.analysis.snapshot.report import SnapshotReport, analyze_snapshot
from traceinsight.trace.snapshot.load import load_memory_snapshot

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "sample_traces" / "make_memory_snapshots.py"
RECORDED = ROOT / "sample_traces" / "memory" / "h200"


def recorded(name: str) -> tuple[SnapshotReport, dict[str, Any]]:
    facts = json.loads((RECORDED / f"{name}.json").read_text())
    return analyze_snapshot(load_memory_snapshot(RECORDED / f"{name}.pickle")), facts


def script_line(text: str) -> int:
    return next(i for i, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line)


def site(report: SnapshotReport, function: str, text: str) -> str:
    """The site label of the script's line holding ``text`` (the recording ran in another
    checkout, so the path's directory is read from the snapshot)."""
    stacks = load_memory_snapshot(report.path).frames
    filename = stacks.filter(
        pl.col("filename").str.ends_with("sample_traces/make_memory_snapshots.py")
    )["filename"][0]
    return f"{filename}:{script_line(text)} ({function})"


def test_recordings_are_small() -> None:
    for path in RECORDED.glob("*.pickle"):
        assert path.stat().st_size < 1_000_000


def test_leak_site_and_growth_per_step() -> None:
    r, facts = recorded("leak")
    assert facts["device"] == "NVIDIA H200" and facts["steps"] == 8
    leaks = r.leaks.leaks
    assert leaks is not None
    # the 8 steps give 7 whole iterations; the list is freed when the function returns
    # (before the dump), which is left out with the tail
    assert r.leaks.iterations == facts["steps"] - 1
    assert leaks.select("site", "growth_per_iteration_bytes").rows() == [
        (site(r, facts["leak_function"], "kept.append(row.expand"), facts["leak_bytes"])
    ]
    assert leaks["live_bytes"][0].to_list() == [
        k * facts["leak_bytes"] for k in range(1, facts["steps"])
    ]
    # randn's site marks the steps
    assert site(r, "leak", 'x = torch.randn(1024, 1024, device="cuda")') in r.leaks.method


def test_fragmentation_replay_reaches_the_kept_bytes() -> None:
    r, facts = recorded("fragmentation")
    sizes = facts["sizes"]
    assert r.peak.peak_allocated_bytes == sum(sizes)
    assert r.peak.sites is not None
    assert r.peak.sites.rows()[0][:3] == (
        site(r, "fragmentation", "torch.empty(size, dtype=torch.uint8"),
        sum(sizes),
        len(sizes),
    )
    # after every other tensor is freed, exactly the kept ones are allocated
    snap = load_memory_snapshot(r.path)
    frees = snap.events.filter(pl.col("action") == "free_completed")["idx"].to_list()
    from traceinsight.analysis.snapshot.replay import replay
    from traceinsight.analysis.snapshot.sites import sites

    levels = replay(snap, 0, sites(snap)).levels
    after_interleaved = levels.filter(pl.col("idx") == frees[len(sizes) // 2 - 1])[
        "allocated_bytes"
    ].item()
    assert after_interleaved == facts["kept_bytes"]


def test_oom_request_and_what_held_it() -> None:
    r, facts = recorded("oom")
    o = r.oom
    assert o.available and o.ooms == 1
    assert o.request_bytes == facts["chunk_bytes"]
    assert o.allocated_bytes == o.reserved_bytes == facts["chunks"] * facts["chunk_bytes"]
    # PyTorch's own message gives the free memory to two decimals of a GiB
    assert f"of which {o.device_free_bytes / (1 << 30):.2f} GiB is free" in facts["error"]
    assert o.shortfall_bytes == o.request_bytes - o.device_free_bytes
    # and the allocated and idle reserved memory at the error as PyTorch's message gives them
    assert (
        f"Of the allocated memory {o.allocated_bytes / (1 << 30):.2f} GiB is allocated by PyTorch"
        in facts["error"]
    )
    assert (
        f"and {o.reserved_bytes - o.allocated_bytes} bytes is reserved by PyTorch but unallocated"
        in facts["error"]
    )
    assert o.sites is not None
    assert o.sites.rows()[0][:3] == (
        site(r, "oom", "chunks.append(torch.empty(OOM_CHUNK_BYTES"),
        facts["chunks"] * facts["chunk_bytes"],
        facts["chunks"],
    )
    # nothing reserved was idle: expandable segments cannot help; freeing the holder does
    assert [fix.kind for fix in o.fixes] == ["free_site", "smaller_batch"]
    # the chunks were freed before the dump; at the error, every segment was full
    f = r.fragmentation
    assert f.moment.startswith("at the out-of-memory error")
    assert (f.segments, f.reserved_free_bytes, f.inactive_blocks) == (facts["chunks"], 0, 0)
    assert not f.expandable_would_help
