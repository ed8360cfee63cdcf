"""The verdict and the findings panel tell one story, in plain words: the first fix the verdict
names is the panel's first finding (a low-confidence one keeps its rank and says so), a verdict
without GPU work names what the panel ranks, counts agree with their nouns, and runs are
labelled by what differs between them. Results here are hand-made (real result classes holding
only what the verdict reads)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from traceinsight.analysis.findings.model import Evidence, Finding, FindingsResult, RegionEvidence
from traceinsight.analysis.findings.verdict.headline import headline
from traceinsight.analysis.lib.words import count, run_labels
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.overview import DeviceOverview, OverviewResult

STEP_NS = 10_000_000


def _breakdown() -> BreakdownResult:
    rows = [{"device": 0, "category": c, "dur_ns": int(v * 1e8), "share": v} for c, v in {"compute": 0.4, "idle": 0.6}.items()]
    return BreakdownResult(window_ns=100_000_000, by_device=pl.DataFrame(rows), devices=pl.DataFrame({"device": [0], "busy_ns": [40_000_000]}))


def _finding(fid: str, pct: float, confidence: Any = "high", region: str | None = None) -> Finding:
    evidence = Evidence(regions=(RegionEvidence(region, 1, 1000),) if region else ())
    return Finding(
        fid, f"title of {fid}", pct, int(pct / 100 * STEP_NS), confidence,
        "the preprocessing spans may hold the profiler's own cost; the rest is measured", "the fix", "m",
        evidence=evidence,
    )


def test_the_verdict_leads_with_the_panels_first_finding_even_at_low_confidence() -> None:
    # The first finding's evidence is a torch.compile annotation and its confidence low: the
    # verdict used to pass over it silently (and then name it in a later clause).
    findings = FindingsResult(
        findings=(
            _finding("host_preprocessing", 56.9, "low", region="## Call CompiledFxGraph abc ##"),
            _finding("eager_attention", 32.0),
        ),
        step_ns=STEP_NS,
        steps=5,
    )
    verdict = headline({"breakdown": _breakdown(), "findings": findings}).verdict
    ids = re.findall(r"\[([a-z0-9_]+)\]", verdict)
    assert ids[:2] == ["host_preprocessing", "eager_attention"]
    assert "Fix first: title of host_preprocessing [host_preprocessing], saving ~57 %" in verdict
    assert "(low confidence: the preprocessing spans may hold the profiler's own cost)" in verdict


def test_a_verdict_without_gpu_work_names_the_panels_finding_not_a_sliver_of_an_op() -> None:
    # A CPU-only run whose time is in gloo spans: the ops' self time is microseconds of 1.28 s.
    overview = OverviewResult(window_ns=1_280_000_000, devices=(DeviceOverview(0, None, 0, 0, 1_280_000_000, 0.0),))
    ops = OpsResult(ops=pl.DataFrame({"name": ["aten::empty", "aten::add"], "host_self_ns": [4_000, 2_000]}))
    findings = FindingsResult(findings=(_finding("cpu_collectives", 85.0),), step_ns=STEP_NS, steps=4)
    verdict = headline({
        "overview": overview,
        "ops": ops,
        "breakdown": BreakdownResult(available=False, reason="no GPU kernels, memcpys or memsets in this trace"),
        "findings": findings,
    }).verdict
    assert verdict.startswith("No GPU work in this trace: only the host was recorded (1.28 s)")
    assert "aten::empty" not in verdict
    assert "Fix first: title of cpu_collectives [cpu_collectives], saving ~85 %" in verdict


def test_counts_agree_with_their_nouns() -> None:
    assert count(1, "step") == "1 step"
    assert count(5, "step") == "5 steps"
    assert count(0, "recompile") == "0 recompiles"
    findings = FindingsResult(findings=(_finding("launch_bound", 30.0),), step_ns=STEP_NS, steps=1)
    verdict = headline({"breakdown": _breakdown(), "findings": findings}).verdict
    assert "(1 step, " in verdict and "1 steps" not in verdict


@pytest.mark.parametrize(
    ("paths", "labels"),
    [
        # two tensorboard folders: the files share a host name and most of a timestamp
        (["runs/base/vm_470.1795560912.pt.trace.json", "runs/fused/vm_470.1795560977.pt.trace.json"], ["base", "fused"]),
        (["a/trace.json.gz", "b/trace.json.gz"], ["a", "b"]),
        (["x/fix_bmm_before.json.gz", "x/fix_bmm_after.json.gz"], ["fix_bmm_before", "fix_bmm_after"]),
        (["same.json", "same.json"], ["same (1)", "same (2)"]),
        (["runs/a/", "runs/b"], ["a", "b"]),
    ],
)
def test_runs_are_labelled_by_what_differs(paths: list[str], labels: list[str]) -> None:
    assert run_labels(paths) == labels


def test_markdown_is_a_format_name(tmp_path: Path) -> None:
    from traceinsight.render.formats import check

    assert check("report", "markdown") == "md"
    assert check("diff", "Markdown") == "md"


def test_memory_on_a_trace_or_an_empty_file_says_what_it_is(tmp_path: Path) -> None:
    from traceinsight.errors import TraceFormatError
    from traceinsight.trace.snapshot.load import load_memory_snapshot

    empty = tmp_path / "empty.pickle"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="file is empty"):
        load_memory_snapshot(empty)
    trace = Path(__file__).resolve().parents[2] / "sample_traces" / "amp_on.json.gz"
    with pytest.raises(TraceFormatError, match=r"a profiler trace \(JSON\), not a memory snapshot.*traceinsight analyze"):
        load_memory_snapshot(trace)
    plain = tmp_path / "t.json"
    plain.write_text('{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="not a memory snapshot"):
        load_memory_snapshot(plain)


def _text(renderable: Any, width: int = 100) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=None, force_terminal=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def test_one_profiler_step_is_not_a_range() -> None:
    from traceinsight.render.sections.overview import render_terminal

    one = _text(render_terminal(OverviewResult(window_ns=1_000, steps=(1,), step_source="ProfilerStep")))
    assert "1 (ProfilerStep#1)" in one and "#1–#1" not in one
    many = _text(render_terminal(OverviewResult(window_ns=1_000, steps=(2, 3, 4), step_source="ProfilerStep")))
    assert "3 (ProfilerStep#2–#4)" in many


def test_recompiled_frame_ids_do_not_read_as_a_count() -> None:
    from traceinsight.analysis.sections.compile import CompileResult
    from traceinsight.render.sections.compile import render_terminal

    text = _text(render_terminal(CompileResult(frames=(0,), recompiled_frames=(0,), recompiles_in_trace=5)))
    assert "(recompiled: frame 0)" in text and "(recompiled: 0)" not in text


def test_gap_start_times_close_together_read_apart() -> None:
    from traceinsight.render.units import times_apart

    starts = [2_313_004_000, 2_313_118_000, 2_313_402_500]
    shown = times_apart(starts)
    assert len(set(shown)) == 3, shown
    assert shown == ["2.3130 s", "2.3131 s", "2.3134 s"]  # one more digit is enough
    assert times_apart([1_000, 5_000_000]) == ["1.0 µs", "5.00 ms"]  # apart already: as ns() writes them
