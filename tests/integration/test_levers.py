"""A fix with several ways to apply it: fp32 matmuls moved to TF32 tensor cores or run under
bf16 autocast, each priced alone on the step without the profiler, against the ResNet-50 pair
``sample_traces/causes_b/precision_fp32`` → ``precision_tf32`` / ``precision_bf16`` (H200, each
fix timed without the profiler in ``cause_timings_b.json``)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from tests.findings_helpers import context
from traceinsight.analysis.findings import FindingsResult
from traceinsight.analysis.findings.model import Finding
from traceinsight.analysis.findings.price.gemm_rates import fp32_levers
from traceinsight.analysis.report import analyze
from traceinsight.render.formats import render_text
from traceinsight.trace.loader import load

CAUSES = Path(__file__).resolve().parents[2] / "sample_traces" / "causes_b"
MEASURED = {r["after"]: float(r["saving_pct"]) for r in json.loads((CAUSES / "cause_timings_b.json").read_text())}
WITHIN = 1.5


@cache
def _fp32_finding() -> tuple[FindingsResult, Finding]:
    found = analyze(load(CAUSES / "precision_fp32.json.gz"), only=["findings"]).sections["findings"]
    assert isinstance(found, FindingsResult)
    f = next(f for f in found.findings if f.id == "fp32_no_tensor_cores")
    return found, f


def test_tf32_and_bf16_are_priced_each_alone() -> None:
    result, f = _fp32_finding()
    assert result.clock == "recorded"
    levers = {lv.label: lv for lv in f.levers}
    assert set(levers) == {"TF32 matmuls", "bf16 autocast"}
    for label, after in (("TF32 matmuls", "precision_tf32"), ("bf16 autocast", "precision_bf16")):
        lever = levers[label]
        assert lever.method.startswith("replayed")
        assert MEASURED[after] / WITHIN <= lever.saving_pct <= MEASURED[after] * WITHIN, (label, lever.saving_pct)
        assert 0 < lever.saving_ns <= (result.step_ns or 0)
    # bf16's tensor-core peak is twice TF32's: the same kernels save more under autocast
    assert levers["bf16 autocast"].saving_pct > levers["TF32 matmuls"].saving_pct
    # the finding's own saving is the first lever's (the device's TF32 path)
    assert f.alone_pct == pytest.approx(levers["TF32 matmuls"].saving_pct, abs=0.2)


def test_levers_reach_every_format() -> None:
    _fp32_finding()
    report = analyze(load(CAUSES / "precision_fp32.json.gz"), only=["findings"])
    assert "bf16 autocast" in render_text(report, "terminal") and "levers" in render_text(report, "md")
    doc = json.loads(render_text(report, "json"))
    found = next(f for f in doc["findings"]["findings"] if f["id"] == "fp32_no_tensor_cores")
    assert [lv["label"] for lv in found["levers"]] == ["TF32 matmuls", "bf16 autocast"]


def test_one_precision_path_has_no_levers(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # Volta/Turing: fp16 is the only tensor-core path, so there is nothing to choose between
    ctx = context(load(CAUSES / "precision_fp32.json.gz"))
    rows = pl.DataFrame({"name": ["k"], "total_ns": [1_000_000], "calls": [1], "flops": [1e9]})
    assert fp32_levers(ctx, rows, 1_000_000, "fp16", 500_000.0, ()) == ()
    assert len(fp32_levers(ctx, rows, 1_000_000, "tf32", 500_000.0, ())) == 2
