"""Paths that used to go wrong without a word: a file's suffix ignored, a view module's failure
forgotten after the first lookup, an analysis's exception turned into a report line by one
command and raised by another."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import sample_path
from traceinsight.cli.app import main


def test_output_suffix_names_the_format_when_none_is_given(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["analyze", str(sample_path("mm_sweep_64")), "-o", str(page)]) == 0
    assert page.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    doc = tmp_path / "compile.json"
    assert main(["compile", str(sample_path("mm_sweep_64")), "-o", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8").startswith("{")
    # A suffix no format claims keeps the terminal text; --format still wins over the suffix.
    text = tmp_path / "report.txt"
    assert main(["compile", str(sample_path("mm_sweep_64")), "-o", str(text)]) == 0
    assert not text.read_text(encoding="utf-8").startswith("{")
    forced = tmp_path / "forced.html"
    assert main(["compile", str(sample_path("mm_sweep_64")), "-f", "json", "-o", str(forced)]) == 0
    assert forced.read_text(encoding="utf-8").startswith("{")


def test_a_suffix_the_command_cannot_write_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "compile.html"
    assert main(["compile", str(sample_path("mm_sweep_64")), "-o", str(page)]) == 2
    assert "cannot be written as html" in capsys.readouterr().err
    assert not page.exists()


def test_a_view_module_that_fails_fails_every_lookup(monkeypatch: pytest.MonkeyPatch, sample_trace) -> None:  # type: ignore[no-untyped-def]
    from traceinsight.analysis.report import analyze
    from traceinsight.render import section_views as views

    result = analyze(sample_trace("mm_sweep_64"), only=["gaps"]).sections["gaps"]
    real = views.import_module

    def broken(name: str) -> object:
        if name.endswith(".gaps"):
            raise RuntimeError("view module broken")
        return real(name)

    monkeypatch.setattr(views, "_loaded", [])
    monkeypatch.setattr(views, "import_module", broken)
    for _ in range(2):  # the second lookup must not quietly fall back to the generic view
        with pytest.raises(RuntimeError, match="view module broken"):
            views.view_of(result)
    monkeypatch.setattr(views, "import_module", real)
    assert views.view_of(result).terminal is not None


def test_analyze_and_diff_stop_alike_on_an_analysis_that_raises(monkeypatch: pytest.MonkeyPatch, sample_trace) -> None:  # type: ignore[no-untyped-def]
    from traceinsight.analysis import runner
    from traceinsight.analysis.diff.compare import diff_traces
    from traceinsight.analysis.report import analyze
    from traceinsight.errors import AnalysisFailed

    real_get = runner.get

    def boom(trace: object, config: object, inputs: object) -> object:
        raise ValueError("planted")

    def get(name: str) -> object:
        spec = real_get(name)
        return dataclasses.replace(spec, run=boom) if name == "gaps" else spec

    monkeypatch.setattr(runner, "get", get)
    trace = sample_trace("mm_sweep_64")
    with pytest.raises(AnalysisFailed, match=r"the gaps analysis failed \(ValueError: planted\)") as from_analyze:
        analyze(trace)
    with pytest.raises(AnalysisFailed, match=r"the gaps analysis failed \(ValueError: planted\)") as from_diff:
        diff_traces(trace, trace)
    assert str(from_analyze.value) == str(from_diff.value)
    assert str(from_analyze.value).startswith(trace.meta.path)
