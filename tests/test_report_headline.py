"""The plain-words verdict: built from whatever sections exist, right on the sample traces."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from traceinsight.analysis.bound import BoundResult
from traceinsight.analysis.gaps import GapsResult
from traceinsight.analysis.headline import Finding, compose, headline
from traceinsight.analysis.report import analyze
from traceinsight.analysis.steps import StepsResult

# Hand-made results: real result classes holding only the columns the headline reads.


def steps_frame(spans: list[int], busy: list[int]) -> pl.DataFrame:
    return pl.DataFrame({"step": list(range(len(spans))), "device_dur_ns": spans, "kernel_ns": busy, "memcpy_ns": [0] * len(spans), "memset_ns": [0] * len(spans), "is_warmup": [False] * len(spans)})


def test_idle_per_step_and_its_main_cause() -> None:
    sections: dict[str, Any] = {
        "steps": StepsResult(steps=steps_frame([100, 100, 100], [60, 59, 58])),
        "gaps": GapsResult(by_cause=pl.DataFrame({"cause": ["data_loading", "sync"], "idle_ns": [300, 100]})),
    }
    head = headline(sections)
    assert head.verdict.startswith("GPU idle 41 % of each step, mostly waiting on data loading (data_loading: 75 % of idle time)")
    assert [f.section for f in head.findings] == ["steps", "gaps"]


def test_negligible_idle_reads_as_busy_and_drops_the_cause() -> None:
    sections: dict[str, Any] = {
        "steps": StepsResult(steps=steps_frame([100, 100], [99, 98])),
        "gaps": GapsResult(by_cause=pl.DataFrame({"cause": ["sync"], "idle_ns": [3]})),
    }
    assert headline(sections).verdict == "GPU busy 98 % of each step."


def test_bound_regions_at_the_annotation_level() -> None:
    regions = pl.DataFrame(
        {
            "name": ["(whole trace)", "gemm", "gemm", "small"],
            "kind": ["trace", "annotation", "annotation", "annotation"],
            "label": ["compute", "compute", "compute", "overhead"],
            "dur_ns": [1000, 300, 100, 50],
            "pct_of_roofline": [50.0, 60.0, 80.0, 1.0],
        }
    )
    head = headline({"bound": BoundResult(regions=regions)})
    texts = [f.text for f in head.findings]
    assert "gemm is compute-bound at 65 % of roofline" in texts
    assert "small is overhead-bound" in texts
    assert "(whole trace)" not in head.verdict


def test_unavailable_and_missing_sections_are_skipped() -> None:
    assert headline({}).verdict.startswith("Nothing to say")
    head = headline({"gaps": GapsResult(available=False, reason="no GPU")})
    assert head.findings == ()


def test_compose_orders_other_findings_by_weight() -> None:
    text = compose([Finding("memory", "low", 1.0), Finding("bound", "high", 30.0), Finding("steps", "GPU idle 50 % of each step", 50.0)])
    assert text == "GPU idle 50 % of each step; high; low."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dataloader_w0", "waiting on data loading"),
        ("tiny_kernels", "launch kernels"),
        ("gemm_bf16", "compute-bound"),
        ("elementwise", "memory-bound"),
    ],
)
def test_verdict_on_sample_traces(sample_trace: Any, name: str, expected: str) -> None:
    report = analyze(sample_trace(name))
    assert expected in report.headline.verdict
    assert report.to_dict()["headline"]["verdict"] == report.headline.verdict


def test_busy_traces_say_busy(sample_trace: Any) -> None:
    verdict = analyze(sample_trace("gemm_bf16")).headline.verdict
    assert verdict.startswith("GPU busy")
    verdict = analyze(sample_trace("dataloader_w0")).headline.verdict
    assert verdict.startswith("GPU idle")
