"""The bounds every findings list keeps, on every bundled sample and every third-party trace
(skipped without ``../shared``): a fix that only gives back the GPU's idle time saves no more
than the idle time of the step it is priced on; no per-step saving exceeds that step; the listed
savings add up to no more than the saving of doing them all, which is at most 100 %.

``check`` runs on every sample and third-party trace inside ``test_story_agreement`` (one
analysis a trace serves both); here, that the check itself catches what it must."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.analysis.findings import FindingsResult
from traceinsight.analysis.report import analyze
from traceinsight.trace.loader import load

ROOT = Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT.parent / "shared" / "third_party"
# rounding of ns to shares and back
SLACK_PCT = 0.05


def _findings(path: Path) -> FindingsResult | None:
    try:
        trace = load(path, cache=False)
    except Exception as exc:  # an execution trace or a capture-only file is not a Kineto trace
        pytest.skip(f"{path.name}: {exc}")
    found = analyze(trace, only=["findings"]).sections["findings"]
    assert isinstance(found, FindingsResult)
    return found if found.available else None


def check(found: FindingsResult) -> list[str]:
    """Every broken bound, as a sentence (empty: none)."""
    broken = []
    step = found.step_ns
    listed = [f for f in found.findings if f.per_step and f.saving_ns > 0]
    for f in listed:
        if step and found.steps and f.saving_ns > step * (1 + SLACK_PCT / 100):
            broken.append(f"{f.id} saves {f.saving_ns} ns per step of {step}")
        idle = found.step_idle_ns
        if f.host_side and idle is not None and found.steps and f.saving_ns > idle * (1 + SLACK_PCT / 100) + 1_000:
            broken.append(f"{f.id} (host-side) saves {f.saving_ns} ns of a step's {found.step_idle_ns} ns idle")
    total = sum(f.saving_pct for f in listed)
    if total > found.total_saving_pct + SLACK_PCT:
        broken.append(f"listed savings add to {total:.2f} % over the combined {found.total_saving_pct:.2f} %")
    if found.total_saving_pct > 100 + SLACK_PCT:
        broken.append(f"combined saving {found.total_saving_pct:.2f} % over 100 %")
    return broken


def test_the_check_catches_a_saving_above_the_idle_time() -> None:
    """The check itself: a host-side saving over the step's idle time is reported."""
    found = _findings(ROOT / "sample_traces" / "fix_launch_before.json.gz")
    assert found is not None and found.findings and found.step_idle_ns
    from dataclasses import replace

    first = found.findings[0]
    assert first.host_side  # launch_bound
    bad = replace(found, findings=(replace(first, saving_ns=found.step_idle_ns * 2), *found.findings[1:]))
    assert any("host-side" in b for b in check(bad))
    over = replace(found, findings=(replace(first, saving_pct=found.total_saving_pct + 5), *found.findings[1:]))
    assert any("add to" in b for b in check(over))
