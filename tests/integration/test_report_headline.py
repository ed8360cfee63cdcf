"""The verdict: the breakdown's time split, then the findings with the largest savings."""

from __future__ import annotations

import re
from typing import Any

import polars as pl
import pytest

from tests.analyses import analysed
from tests.conftest import sample_names, sample_path
from traceinsight.analysis.findings.model import Finding, FindingsResult
from traceinsight.analysis.findings.verdict.headline import Finding as Clause
from traceinsight.analysis.findings.verdict.headline import compose, headline, is_internal
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.overview import DeviceOverview, OverviewResult
from traceinsight.analysis.window.spec import WindowResult

# Hand-made results: real result classes holding only what the headline reads.


def breakdown(shares: dict[str, float], window_ns: int = 100_000_000) -> BreakdownResult:
    rows = [{"device": 0, "category": c, "dur_ns": int(v * window_ns), "share": v} for c, v in shares.items()]
    busy = int(sum(v for c, v in shares.items() if c != "idle") * window_ns)
    return BreakdownResult(
        window_ns=window_ns,
        by_device=pl.DataFrame(rows),
        devices=pl.DataFrame({"device": [0], "busy_ns": [busy]}),
    )


def finding(fid: str, pct: float, step_ns: int) -> Finding:
    return Finding(fid, f"title of {fid}", pct, int(pct / 100 * step_ns), "high", "r", "the fix", "m")


def test_time_split_uses_the_breakdowns_figures_then_the_top_fixes() -> None:
    sections: dict[str, Any] = {
        "breakdown": breakdown({"compute": 0.52, "communication_allreduce": 0.25, "memcpy_d2d": 0.003, "idle": 0.227}),
        "gaps": GapsResult(by_cause=pl.DataFrame({"cause": ["launch_overhead", "sync"], "idle_ns": [300, 100]})),
        "findings": FindingsResult(
            findings=(finding("exposed_communication", 25.0, 10_000_000), finding("launch_bound", 1.5, 10_000_000)),
            step_ns=10_000_000,
            steps=10,
        ),
    }
    head = headline(sections)
    assert head.verdict.startswith(
        "GPU time over the traced 100.0 ms (10 steps, 10.0 ms each): compute 52.0 %, "
        "exposed communication 25.0 %, idle 22.7 % (mostly waiting for the host to launch kernels)."
    )
    assert "Fix first: title of exposed_communication [exposed_communication], saving ~25 % (2.5 ms per step)" in head.verdict
    assert "launch_bound" not in head.verdict  # below the 2 % a finding needs to be in the verdict
    assert dict(head.shares)["idle"] == pytest.approx(22.7)
    assert head.to_dict()["shares_pct"]["communication"] == pytest.approx(25.0)


def test_negligible_idle_drops_the_cause_and_no_finding_says_so() -> None:
    sections: dict[str, Any] = {
        "breakdown": breakdown({"compute": 0.98, "idle": 0.02}),
        "gaps": GapsResult(by_cause=pl.DataFrame({"cause": ["sync"], "idle_ns": [3]})),
        "findings": FindingsResult(),
    }
    verdict = headline(sections).verdict
    assert verdict == "GPU time over the traced 100.0 ms: compute 98.0 %, idle 2.0 %. No material finding (none would save 1 % or more)."


def test_no_gpu_work_gives_a_host_verdict() -> None:
    overview = OverviewResult(window_ns=5_000_000, devices=(DeviceOverview(0, None, 0, 0, 5_000_000, 0.0),))
    sections: dict[str, Any] = {
        "overview": overview,
        "breakdown": BreakdownResult(available=False, reason="no GPU kernels, memcpys or memsets in this trace"),
        "findings": FindingsResult(available=False, reason="no analysed window"),
    }
    verdict = headline(sections).verdict
    assert verdict.startswith("No GPU work in this trace: only the host was recorded (5.0 ms)")
    assert "idle" not in verdict


def test_internal_annotations_are_recognised() -> None:
    for name in ("ProfilerStep#3", "## Call CompiledFxGraph fabc ##", "dynamo_data: compile_id=0/0", "entire_frame_compile_data: x", "Torch-Compiled Region: 0/0"):
        assert is_internal(name), name
    assert not is_internal("Optimizer.step#AdamW.step")
    assert not is_internal("big_gemm_bf16")


def test_unavailable_and_missing_sections_are_skipped() -> None:
    assert headline({}).verdict.startswith("Nothing to say")
    assert headline({"gaps": GapsResult(available=False, reason="no GPU")}).findings == ()


def test_compose_puts_time_first_then_fixes_then_the_rest() -> None:
    text = compose([Clause("memory", "low", 1.0), Clause("findings", "Fix first: x", 30.0), Clause("breakdown", "GPU time: idle 50.0 %", 50.0)])
    assert text == "GPU time: idle 50.0 %. Fix first: x. Low."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dataloader_w0", "Fix first: the GPU waits for the DataLoader [dataloader_stall]"),
        ("tiny_kernels", "[launch_bound]"),
        ("gemm_bf16", "Every step is compute-bound"),
        # 100 × (add, mul, relu) over 1 GiB, eager: memory-bound, and one fused kernel would do it
        ("elementwise", "[unfused_elementwise]"),
        ("train_eager", "Fix first: float32 GEMMs run without tensor cores"),
        ("ddp_train.rank0", "exposed communication 42.5 %"),
        ("fix_pinned_before", "[pageable_memcpy]"),
    ],
)
def test_verdict_on_sample_traces(sample_trace: Any, name: str, expected: str) -> None:
    assert expected in analysed(sample_path(name)).headline.verdict


def test_train_eager_never_leads_with_a_small_region(sample_trace: Any) -> None:
    verdict = analysed(sample_path("train_eager")).headline.verdict
    assert "Optimizer.step" not in verdict
    assert "roofline" not in verdict.split(".")[0]


@pytest.mark.parametrize("name", sample_names())
def test_verdict_agrees_with_the_breakdown_and_names_no_internals(sample_trace: Any, name: str) -> None:
    report = analysed(sample_path(name))
    head = report.headline
    bd = report.sections["breakdown"]
    assert isinstance(bd, BreakdownResult) and bd.available
    rows = bd.by_device.filter(pl.col("device") == head.device)
    groups = rows.with_columns(pl.col("category").str.split("_").list.first()).group_by("category").agg(pl.col("share").sum())
    expected = {r["category"]: 100 * r["share"] for r in groups.iter_rows(named=True)}
    assert dict(head.shares) == pytest.approx(expected)
    # Every share the verdict quotes is the breakdown's, with the breakdown's rounding. The time
    # split is the first sentence, after the window's limits when the window is not steady state.
    window = report.sections["window"]
    assert isinstance(window, WindowResult)
    assert head.verdict.startswith("This window is not steady state") is (not window.steady)
    time_sentence = next(s for s in head.verdict.split(". ") if s.startswith("GPU time"))
    quoted = dict(re.findall(r"(compute|exposed communication|copies|idle) (\d+\.\d) %", time_sentence))
    names = {"compute": "compute", "exposed communication": "communication", "copies": "memcpy", "idle": "idle"}
    for word, value in quoted.items():
        assert value == f"{expected[names[word]]:.1f}"
    assert "idle" in quoted
    assert not re.search(r"ProfilerStep#|CompiledFxGraph|compile_id=|entire_frame_compile", head.verdict)
    assert "GPU idle 100" not in head.verdict
