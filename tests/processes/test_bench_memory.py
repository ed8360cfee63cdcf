"""benchmarks/bench_memory.py still runs (on a 1 MB snapshot, not for timing), and what it
synthesises is a snapshot traceinsight reads with the sizes it claims."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from traceinsight.trace.snapshot.load import load_memory_snapshot

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_bench_memory_synthesises_and_measures(tmp_path: Path) -> None:
    target = tmp_path / "snap.pickle"
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_memory.py"),
            "--target-mb",
            "1",
            "--out",
            str(target),
            "--modes",
            "pickle,load,command",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert 0.7e6 < target.stat().st_size < 1.3e6
    rows = {
        m.group(1): int(m.group(2).replace(",", ""))
        for m in re.finditer(r"^(pickle|load|command)\s+([\d,]+)\s", out, re.M)
    }
    snap = load_memory_snapshot(target)
    n = snap.events.height
    assert rows == {"pickle": n, "load": n, "command": n}
    assert snap.events["action"].unique().sort().to_list() == [
        "alloc",
        "free_completed",
        "free_requested",
        "segment_alloc",
    ]
    assert snap.frames["stack_id"].n_unique() > 100
