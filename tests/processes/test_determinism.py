"""The same input gives byte-identical output: ties are broken by name, and float totals are
summed in a fixed order (polars' group_by returns groups in an order that varies between runs).

``fix_item_sync_before`` has the ties that used to flip: ``aten::item`` and
``aten::_local_scalar_dense`` with 32 calls each in the host_sync evidence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import traceinsight as ti
from traceinsight.analysis.diff.contrib import contributions
from traceinsight.render.envelope import dumps

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"


def _cli(*argv: str) -> str:
    # A fresh process each time: the order of polars' groups changes between processes.
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "traceinsight", *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ("analyze", "sample_traces/fix_item_sync_before.json.gz", "-f", "json"),
        ("diff", "sample_traces/fix_item_sync_before.json.gz", "sample_traces/fix_item_sync_after.json.gz", "-f", "json"),
    ],
    ids=["analyze", "diff"],
)
def test_two_runs_write_the_same_json(argv: tuple[str, ...]) -> None:
    assert _cli(*argv) == _cli(*argv)


def test_tied_evidence_is_in_name_order(sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("fix_item_sync_before")
    first = ti.analyze(trace, only=["findings"])
    sync = next(f for f in first.findings.findings if f.id == "host_sync")
    calls = [(op.calls, op.name) for op in sync.evidence.ops]
    assert calls == [(32, "aten::_local_scalar_dense"), (32, "aten::item")]  # a tie, broken by name
    assert dumps(ti.analyze(trace, only=["findings"])) == dumps(first)


def test_share_of_delta_does_not_depend_on_row_order() -> None:
    # Hand-made: 60 kernels whose deltas do not add up exactly in floating point, fed in two
    # orders; the shares must be identical to the last bit.
    names = [f"k{i:02d}" for i in range(60)]
    before = pl.DataFrame({"name": names, "dur_ns": [1_000 + 7 * i for i in range(60)]})
    after = pl.DataFrame({"name": names, "dur_ns": [1_000 + 13 * i + (i % 7) * 3 for i in range(60)]})
    one = contributions(before, after, ["name"], 3, 7)
    other = contributions(before.reverse(), after.sample(fraction=1.0, shuffle=True, seed=1), ["name"], 3, 7)
    assert one["name"].to_list() == other["name"].to_list()
    assert one["share_of_delta"].to_list() == other["share_of_delta"].to_list()
    assert one["share_of_delta"].sum() == pytest.approx(1.0)
