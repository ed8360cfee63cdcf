"""Pairs no pricing rule was built on (``sample_traces/make_holdout_pairs.py``, recorded on an
H100 with each fix timed without the profiler, 8 interleaved rounds: ``holdout_timings.json``).
Medians, because a round can hold an outlier."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from traceinsight.analysis.findings import FindingsResult
from traceinsight.analysis.report import analyze
from traceinsight.trace.loader import load

HOLDOUT = Path(__file__).resolve().parents[2] / "sample_traces" / "holdout"
TIMINGS = {row["pair"]: row for row in json.loads((HOLDOUT / "holdout_timings.json").read_text())}


@cache
def findings(name: str) -> FindingsResult:
    found = analyze(load(HOLDOUT / f"holdout_{name}.json.gz"), only=["findings"]).sections["findings"]
    assert isinstance(found, FindingsResult)
    return found


def test_empty_cache_at_the_end_of_a_vit_step_is_led_and_priced_by_its_measured_fix() -> None:
    # torch.cuda.empty_cache() after the optimizer: its cudaFree calls run after the step's last
    # kernel, which a step that ended with its last kernel left out (priced 14 % then)
    before = findings("vit_empty_cache_before")
    churn = before.findings[0]
    assert churn.id == "allocator_churn" and churn.alone_pct is not None
    measured = float(TIMINGS["vit_empty_cache"]["median_saving_pct"])
    assert measured / 1.5 <= churn.alone_pct <= measured * 1.5, (churn.alone_pct, measured)
    after = findings("vit_empty_cache_after")
    assert "allocator_churn" not in {f.id for f in (*after.findings, *after.not_material)}


def test_a_per_step_item_that_costs_nothing_measurable_is_not_flagged() -> None:
    # ResNet-18 reading its loss and accuracy on the host every step: the fix measured within
    # the rounds' noise; the sync must not be a material finding on either side
    measured = float(TIMINGS["metrics_sync"]["median_saving_pct"])
    assert abs(measured) < 5.0
    for side in ("before", "after"):
        found = findings(f"metrics_sync_{side}")
        assert "host_sync" not in {f.id for f in found.findings}, side


def test_a_synchronize_before_the_host_builds_the_next_batch_is_named_first() -> None:
    # GPT-2 training with torch.cuda.synchronize() after the optimizer step, then the next
    # ragged batch padded in Python: the line to change is the synchronize, not the launches
    before = findings("sync_then_prep_before")
    assert before.findings[0].id == "host_sync", [f.id for f in before.findings]
    # its price is bounded by the rounds' spread: above the median's saving, within 1.5x of the mean's
    row = TIMINGS["sync_then_prep"]
    lead = before.findings[0].saving_pct
    assert float(row["median_saving_pct"]) <= lead <= 1.5 * float(row["saving_pct"]), (lead, row)
    after = findings("sync_then_prep_after")
    assert "host_sync" not in {f.id for f in after.findings}
