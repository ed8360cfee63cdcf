"""Every view tells one story, from the same results: on every sample trace (``sample_traces/``)
and every third-party trace (``../shared/third_party``, skipped where absent), the first fix the
verdict names is the findings panel's first finding in the terminal's first screen and full
report, the JSON, the Markdown and the HTML; the verdict's time split adds up to the window and
its idle share is the breakdown's; the verdict counts the steps the steps line counts; the first
screen fits 80×50; the HTML page says the verdict once. For ``diff`` and ``compare`` on pairs of
runs: compute, copies, communication and idle add up to the mean step, the idle causes add up to
the idle, and ``compare`` shows the idle ``diff`` shows. The savings' bounds of
``test_savings_invariants`` are checked on the same analysis of every trace."""

from __future__ import annotations

import io
import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from rich.console import Console

from tests.analyses import analysed
from tests.integration.test_savings_invariants import check as broken_bounds
from traceinsight.analysis.findings.catalogue import MEMORY_FINDINGS
from traceinsight.analysis.findings.model import FindingsResult
from traceinsight.analysis.findings.verdict.headline import lead_findings
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.api import compare, diff
from traceinsight.render.formats import render
from traceinsight.render.glance import SCREEN_LINES, glance_renderable

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
SHARED = ROOT.parent / "shared" / "third_party"


def _traces(root: Path) -> list[Path]:
    return sorted(root.rglob("*.json.gz")) if root.exists() else []


def _id(path: Path) -> str:
    for base in (SAMPLES, SHARED):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return path.name


SAMPLE_TRACES = _traces(SAMPLES)
# The samples in sub-folders (catalogue/, causes/, realclock/, ...) are checked by
# test_story_agreement_folders_{a,b}.py, half each: three files of about equal work that the
# suite's workers (whole files each) can run side by side.
TOP_SAMPLES = [p for p in SAMPLE_TRACES if p.parent == SAMPLES]
FOLDER_SAMPLES = [p for p in SAMPLE_TRACES if p.parent != SAMPLES]
# HTA's execution-trace (ET) file is an operator graph, not a profiler trace: analyze refuses it
# with one line naming the file; its Kineto twin is in the list.
THIRD_PARTY = [p for p in _traces(SHARED) if not p.name.endswith("_et.json.gz")]
needs_shared = pytest.mark.skipif(not SHARED.exists(), reason="the third-party traces (../shared beside the checkout) are absent")


def squeezed(text: str) -> str:
    """Text without whitespace and box drawing, so that wrapped lines compare as one."""
    return re.sub(r"[\s│─╭╮╰╯]", "", text)


def _screen(report: Any, width: int = 80) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, color_system=None, soft_wrap=False)
    console.print(glance_renderable(report, narrow=width < 80, width=width))
    return buf.getvalue()


def _expected_first(findings: FindingsResult | None) -> str | None:
    """The finding the verdict must name first: the panel's first that leads, else (no finding
    saves enough to lead) the largest time finding, which the verdict names as the largest."""
    if findings is None or not findings.findings:
        return None
    leads = lead_findings(findings)
    if leads:
        return leads[0].id
    timed = [f for f in findings.findings if f.id not in MEMORY_FINDINGS]
    return timed[0].id if timed else None


def _first(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.S)
    return match.group(1) if match else None


def check_report(path: Path) -> None:
    # The run's one analysis of the trace (tests/analyses.py): every view below renders it.
    report = analysed(path)
    head = report.headline
    raw = report.sections.get("findings")
    findings = raw if isinstance(raw, FindingsResult) and raw.available else None
    ids = {f.id for f in findings.findings} if findings else set()
    named = [i for i in re.findall(r"\[([a-z0-9_]+)\]", head.verdict) if i in ids]
    expected = _expected_first(findings)
    # The verdict's first fix is the panel's first (or, when none leads, the largest).
    if expected is not None:
        assert named and named[0] == expected, (named, expected, head.verdict)
    panel_first = findings.findings[0].id if findings and findings.findings else None
    # The savings' bounds (no host-side saving over the idle, none over the step, a sum within the whole).
    if findings is not None:
        assert not broken_bounds(findings), broken_bounds(findings)

    # The time split: every share of the window, adding up to all of it; idle as the breakdown has it.
    breakdown = report.sections.get("breakdown")
    if head.shares:
        assert sum(v for _, v in head.shares) == pytest.approx(100.0, abs=0.01)
        assert isinstance(breakdown, BreakdownResult)
        idle = float(breakdown.by_device.filter((pl.col("device") == head.device) & (pl.col("category") == "idle"))["share"].sum())
        assert dict(head.shares).get("idle", 0.0) == pytest.approx(100 * idle, abs=1e-6)
        quoted = re.search(r"idle (\d+\.\d) %", head.verdict)
        assert quoted and quoted.group(1) == f"{100 * idle:.1f}"

    # The steps the verdict counts are the steps the step time is the mean of, as the steps line counts them.
    steps = report.sections.get("steps")
    count = re.search(r"\((\d+) steps?, ", head.verdict)
    if count and isinstance(steps, StepsResult) and steps.available and steps.steps.height:
        steady = steps.steps.filter(~pl.col("is_warmup"))
        steady = steady if steady.height else steps.steps
        assert int(count.group(1)) == steady.height
        # each kept step's device time is its compute, copies, communication and idle
        busy = steady.select(pl.sum_horizontal("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns")).to_series()
        assert (busy <= steady["device_dur_ns"] + 1).all()

    # The first screen: 80×50, the verdict whole, the same first finding.
    screen = _screen(report)
    assert len(screen.splitlines()) <= SCREEN_LINES, screen
    assert squeezed(head.verdict) in squeezed(screen)
    if panel_first is not None:
        assert _first(r"Findings.*?\n\W*1\.\s.*?\[([a-z0-9_]+)\]", screen) == panel_first
        assert panel_first == (expected if lead_findings(findings) else panel_first)  # type: ignore[arg-type]

    # The full terminal report, JSON, Markdown and HTML: the same verdict and the same first finding.
    full = render(report, "terminal", width=100)
    assert squeezed(head.verdict) in squeezed(full)
    data = json.loads(render(report, "json"))
    assert data["headline"]["verdict"] == head.verdict
    assert data["headline"]["shares_pct"] == pytest.approx({g: round(v, 3) for g, v in head.shares})
    md = render(report, "md")
    assert head.verdict in md
    page = render(report, "html")
    assert unescape(page).count(head.verdict) == 1  # once: no second copy as bullets
    if panel_first is not None:
        assert data["findings"]["findings"][0]["id"] == panel_first
        assert _first(r"─ Findings ─.*?\n\W*1\. ([a-z0-9_]+) ", full) == panel_first
        assert _first(r"### 1\. [^\n]*\(`([a-z0-9_]+)`\)", md) == panel_first
        assert _first(r"<h3>1\. .*?<code>([a-z0-9_]+)</code>", page) == panel_first


@pytest.mark.parametrize("path", TOP_SAMPLES, ids=_id)
def test_every_view_of_a_sample_tells_one_story(path: Path) -> None:
    check_report(path)


def _pairs() -> list[tuple[Path, Path]]:
    pairs = [(p, p.with_name(p.name.replace("_before", "_after"))) for p in sorted(SAMPLES.glob("*_before.json.gz"))]
    pairs += [(SAMPLES / "amp_off.json.gz", SAMPLES / "amp_on.json.gz"), (SAMPLES / "dataloader_w0.json.gz", SAMPLES / "dataloader_w4.json.gz")]
    return [(b, a) for b, a in pairs if b.exists() and a.exists()]


def check_pair(before: Path, after: Path) -> None:
    result = diff(before, after)
    table = result.breakdown.table
    series = compare([before, after], only=["runs", "breakdown"])
    for i, side in enumerate(("before", "after")):
        per_step = {r["category"]: r[f"{side}_ns_per_step"] for r in table.iter_rows(named=True)}
        if result.per == "step":
            # compute + copies + communication + idle = the mean kept step
            mean = getattr(result.step_time, f"{side}_mean_ns")
            assert sum(per_step.values()) == pytest.approx(mean, rel=1e-6)
            # compare's figures are diff's
            row = series.runs.row(i, named=True)
            assert row["idle_ns"] == pytest.approx(per_step["idle"], rel=1e-6, abs=1.0)
            assert row["compute_ns"] == pytest.approx(per_step["compute"], rel=1e-6, abs=1.0)
            assert row["copies_ns"] == pytest.approx(per_step["memcpy"] + per_step["memset"], rel=1e-6, abs=1.0)
        if result.idle_by_cause.available:
            causes = float(result.idle_by_cause.table[f"{side}_ns_per_step"].sum())
            assert causes == pytest.approx(per_step["idle"], rel=1e-6, abs=1.0)
    for fmt in ("terminal", "md", "html"):
        text = render(result, fmt, width=100)  # type: ignore[arg-type]
        assert result.before_label in text and result.after_label in text


@pytest.mark.parametrize(("before", "after"), _pairs(), ids=lambda p: p.name.removesuffix(".json.gz"))
def test_diff_and_compare_of_sample_pairs_tell_one_story(before: Path, after: Path) -> None:
    check_pair(before, after)


@needs_shared
def test_diff_and_compare_of_a_third_party_pair_tell_one_story() -> None:
    # One model on two devices (H100, MI300): the same program, other hardware.
    check_pair(SHARED / "tracelens" / "h100_falconsai_vit.json.gz", SHARED / "tracelens" / "mi300_falconsai_vit.json.gz")
