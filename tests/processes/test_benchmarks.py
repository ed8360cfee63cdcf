"""The benchmark scripts still run against the current API (on small inputs, not for timing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import sample_path

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(script: str, *args: str, cwd: Path) -> str:
    env = dict(os.environ, TRACEINSIGHT_CACHE_DIR=str(cwd / "cache"))
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_bench_analyses_times_every_single_trace_analysis(tmp_path: Path) -> None:
    from traceinsight.analysis.registry import ANALYSES

    out = _run("bench_analyses.py", str(sample_path("train_eager")), "--no-cache", cwd=tmp_path)
    timed = [row for row in re.findall(r"^(\w+)\s+(\d+\.\d+)$", out, re.M) if row[0] != "sum"]
    assert [name for name, _ in timed] == [s.name for s in ANALYSES if s.kind == "trace"]
    assert all(float(seconds) > 0 for _, seconds in timed)
    assert re.search(r"^all together\s+\d+\.\d+$", out, re.M)
    assert re.search(r"^critical_path \+ findings: [\d.]+ s = [\d.]+ x the cold load$", out, re.M), out
    assert re.search(r"^traceinsight analyze --no-cache --format json, end to end: [\d.]+ s", out, re.M), out


def test_bench_analyses_shows_growth_between_two_sizes(tmp_path: Path) -> None:
    """``--tiles`` builds the trace at two sizes and says how each time grew against the events."""
    out = _run("bench_analyses.py", "--tiles", "1,2", "--source", str(sample_path("train_compiled")),
               "--only", "gaps,critical_path", "--no-end-to-end", "--out-dir", str(tmp_path), cwd=tmp_path)
    assert re.search(r"^growth from [\d,]+ to [\d,]+ events \(2\.0 x\)", out, re.M), out
    grown = dict(re.findall(r"^  (\S.*?)\s+[\d.]+ s ->\s+[\d.]+ s\s+([\d.]+)$", out, re.M))
    assert {"gaps", "critical_path", "all together", "load"} <= set(grown), grown
    # the source trace is plain JSON after tiling: json.load is timed against it
    assert "json.load" in grown


def test_bench_load_measures_a_trace_made_by_make_large_trace(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    made = _run("make_large_trace.py", str(sample_path("train_compiled")), "-o", str(big), "--target-mb", "8", cwd=tmp_path)
    assert big.stat().st_size > 6_000_000 and "copies of" in made
    out = _run("bench_load.py", str(big), "--workers", "auto,1", cwd=tmp_path)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line.strip()}
    assert set(rows) == {"json_load", "cold", "cold_w1", "cached"}
    # every load reads the same rows
    assert len({row[-1] for name, row in rows.items() if name != "json_load"}) == 1


def test_bench_job_compares_the_pool_sizes(tmp_path: Path) -> None:
    out = _run("bench_job.py", "--ranks", "2", cwd=tmp_path)
    assert re.search(r"^2 ranks, --jobs 1: [\d.]+ s", out, re.M)
    assert re.search(r"^2 ranks, --jobs 2: [\d.]+ s", out, re.M)
    assert re.search(r"^jobs 2 / jobs 1 time: [\d.]+$", out, re.M)
