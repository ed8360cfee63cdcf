"""The analysis graph: requirements run first and once, only chosen sections are shown, and a
bad graph (unknown requirement, cycle) is refused when the registry is built."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from traceinsight.analysis.core import display
from traceinsight.analysis.core.base import AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.core.registry import RegistryError, topological_order
from traceinsight.analysis.registry import ANALYSES, RUN_ORDER, closure
from traceinsight.analysis.report import analyze
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections import bound, gaps


def _spec(name: str, *requires: str) -> AnalysisSpec:
    return AnalysisSpec(name=name, title=name, run=lambda trace, config, inputs: Result(), requires=requires)


def test_every_requirement_runs_before_its_user() -> None:
    for spec in ANALYSES:
        for required in spec.requires:
            assert RUN_ORDER.index(required) < RUN_ORDER.index(spec.name)
    assert "gaps" in bound.SPEC.requires


def test_closure_adds_requirements_in_run_order() -> None:
    assert closure(["bound"]) == ("gaps", "bound")
    assert closure(["overview"]) == ("overview",)


def test_unknown_requirement_is_refused() -> None:
    with pytest.raises(RegistryError, match="unknown analysis 'nope'"):
        topological_order((_spec("a", "nope"),))


def test_cycle_is_refused_and_named() -> None:
    with pytest.raises(RegistryError, match="a -> b -> a"):
        topological_order((_spec("a", "b"), _spec("b", "a")))


def test_duplicate_name_is_refused() -> None:
    with pytest.raises(RegistryError, match="twice"):
        topological_order((_spec("a"), _spec("a")))


def test_inputs_are_typed() -> None:
    result = gaps.GapsResult()
    inputs = Inputs({"gaps": result})
    assert inputs.get("gaps", gaps.GapsResult) is result
    assert inputs.maybe("bound", bound.BoundResult) is None
    with pytest.raises(LookupError, match="'bound'"):
        inputs.get("bound", bound.BoundResult)
    with pytest.raises(TypeError, match="GapsResult, not a BoundResult"):
        inputs.get("gaps", bound.BoundResult)


def test_analyze_runs_requirements_once_and_shows_only_chosen(sample_trace: Callable[[str], Any]) -> None:
    calls: list[str] = []
    seen: list[str] = []
    report = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["bound"], on_section=seen.append)
    assert list(report.sections) == ["bound"]
    assert seen == ["gaps", "bound"]  # the requirement ran, once, and is not shown
    assert report.bound.gap_causes_available
    both = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["gaps", "bound"], on_section=calls.append)
    assert calls == ["gaps", "bound"]
    assert list(both.sections) == ["gaps", "bound"]


def test_bound_reads_the_gaps_it_was_given(sample_trace: Callable[[str], Any]) -> None:
    trace = sample_trace("mm_sweep_64")
    config = AnalysisConfig()
    given = gaps.run(trace, config)
    via_inputs = bound.run(trace, config, Inputs({"gaps": given}))
    standalone = run_one(trace, "bound", config)
    assert via_inputs.regions.equals(standalone.regions)


def test_report_lists_sections_for_completion(sample_trace: Callable[[str], Any]) -> None:
    report = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["overview", "gaps"])
    assert {"overview", "gaps"} <= set(dir(report))
    assert "bound" not in dir(report)
    assert report.section("gaps", gaps.GapsResult) is report.gaps
    assert report.section("bound", bound.BoundResult) is None
    with pytest.raises(TypeError):
        report.section("gaps", bound.BoundResult)


def test_write_json_is_the_envelope(sample_trace: Callable[[str], Any], tmp_path: Path) -> None:
    from traceinsight.render import envelope

    report = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["overview"])
    out = tmp_path / "report.json"
    report.write_json(out)
    assert out.read_text() == envelope.dumps(report)
    assert json.loads(out.read_text())["overview"] == report.to_dict()["overview"]
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left behind


def test_views_come_from_registered_renderers(sample_trace: Callable[[str], Any]) -> None:
    report = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["overview"])
    saved = dict(display._RENDERERS)
    try:
        display._RENDERERS.clear()
        with pytest.raises(display.NoRendererError, match="report_markdown"):
            report.to_markdown()
        display.register("report_markdown", lambda r: f"# {r.trace_path}")
        assert report.to_markdown() == f"# {report.trace_path}"
        with pytest.raises(ValueError, match="unknown display kind"):
            display.register("pdf", str)
    finally:
        display._RENDERERS.clear()
        display._RENDERERS.update(saved)


def test_a_report_unpickled_in_a_fresh_process_renders_itself(
    sample_trace: Callable[[str], Any], tmp_path: Path
) -> None:
    import pickle
    import subprocess
    import sys

    # GIVEN a report pickled here
    report = analyze(sample_trace("mm_sweep_64"), AnalysisConfig(), only=["overview", "gaps"])
    pickled = tmp_path / "report.pickle"
    pickled.write_bytes(pickle.dumps(report))
    # WHEN a fresh interpreter, which never imported the presentation package, unpickles it
    # and asks for its Markdown and JSON
    code = (
        "import pickle, sys; "
        f"r = pickle.loads(open({str(pickled)!r}, 'rb').read()); "
        "assert 'traceinsight.render' not in sys.modules; "
        f"r.write_json({str(tmp_path / 'fresh.json')!r}); sys.stdout.write(r.to_markdown())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # THEN it gets what this process renders
    assert out.stdout == report.to_markdown()
    report.write_json(tmp_path / "here.json")
    assert (tmp_path / "fresh.json").read_text() == (tmp_path / "here.json").read_text()
