"""Every report format renders on every sample trace and on hand-made edge cases.

The hand-made traces (written by ``tests/handmade.py``, not recorded by a profiler) cover what
no real capture in ``sample_traces/`` has: CPU only, a single kernel, no steps, steps without GPU work.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.analyses import analysed
from tests.conftest import sample_names, sample_path
from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.report import analyze
from traceinsight.render.formats import perfetto, render
from traceinsight.trace.loader import load


def check_all_formats(trace: Any, report: Any = None) -> None:
    report = analyze(trace) if report is None else report
    data = json.loads(render(report, "json"))
    assert data["headline"]["verdict"]
    text = render(report, "terminal", width=80)
    assert "Verdict" in text and max(len(line) for line in text.splitlines()) <= 80
    md = render(report, "md")
    assert md.startswith("# traceinsight report")
    page = render(report, "html", trace=trace)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # Well-formed enough for a browser: every chart closes and nothing numeric leaked as NaN.
    assert page.count("<svg") == page.count("</svg>")
    assert not re.search(r"='(nan|inf|-inf)'", page)
    assert perfetto(trace, report)


@pytest.mark.parametrize("name", sample_names())
def test_every_sample_renders_in_every_format(sample_trace: Any, name: str) -> None:
    # The run's one analysis of the sample (tests/analyses.py), rendered in every format.
    check_all_formats(sample_trace(name), analysed(sample_path(name)))


def handmade(tmp_path: Path, name: str, events: list[dict[str, Any]]) -> Any:
    return load(write_trace(tmp_path / f"{name}.json", events), cache=False)


def test_handmade_cpu_only_trace(tmp_path: Path) -> None:
    trace = handmade(tmp_path, "cpu_only", [op("aten::add", 0, 10), op("aten::mul", 12, 5)])
    check_all_formats(trace)
    report = analyze(trace)
    assert report.headline.verdict.startswith("No GPU work in this trace: only the host was recorded")
    assert "aten::add 10 µs" in report.headline.verdict


def test_handmade_single_kernel_without_steps(tmp_path: Path) -> None:
    trace = handmade(
        tmp_path,
        "one_kernel",
        [op("aten::mm", 0, 20), launch("cudaLaunchKernel", 2, 5, 1), kernel("gemm_kernel", 10, 30, 1)],
    )
    check_all_formats(trace)


def test_handmade_steps_without_gpu_work(tmp_path: Path) -> None:
    trace = handmade(
        tmp_path,
        "steps_only",
        [op("ProfilerStep#1", 0, 50, cat="user_annotation"), op("ProfilerStep#2", 60, 50, cat="user_annotation"), op("aten::add", 70, 5)],
    )
    check_all_formats(trace)
