"""A single-trace report's ``to_markdown`` / ``write_html`` / ``write_json`` give exactly the
files ``traceinsight analyze TRACE -f md/html/json -o FILE`` writes, on real traces:
``train_eager`` (transformer training recorded with ``profile_memory=True`` and GPU counters)
and ``fix_bmm_after`` (the smallest sample: eight kernels, counters, no memory events); see
sample_traces/README.md.

The JSON envelope holds no timestamp or other value that changes from run to run, so every
file is compared whole, byte for byte. Both sides read the trace without the cache: a cached
trace keeps the path it was first cached under, whichever spelling was given later.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight import atomic
from traceinsight.analysis.report import Report
from traceinsight.cli.app import main
from traceinsight.render.html.report import NO_TRACE_SECTION
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

SAMPLES = ("train_eager", "fix_bmm_after")
# Section choices as the command takes them, and as Python takes them.
CHOICES: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "all": ([], {}),
    "skip": (
        ["--skip", "bound,memory", "--skip", "compile"],
        {"skip": ["bound,memory", "compile"]},
    ),
    "only": (["--only", "overview,gaps,findings"], {"only": ["overview,gaps,findings"]}),
}


# One Python-side analysis per (sample, section choice), shared by the tests that only write it
# out: the three formats write one report, and a frozen report is the same whoever wrote it
# first. The sample's trace (sample_trace, loaded once per process) outlives it, so its weak
# reference still reaches the trace.
_REPORTS: dict[tuple[str, str], Report] = {}


def _report(sample_trace: Callable[[str], Trace], name: str, choice: str) -> Report:
    if (name, choice) not in _REPORTS:
        _REPORTS[(name, choice)] = ti.analyze(sample_trace(name), **CHOICES[choice][1])
    return _REPORTS[(name, choice)]


def _cli_file(tmp_path: Path, name: str, fmt: str, argv: list[str]) -> bytes:
    target = tmp_path / f"cli.{fmt}"
    path = str(sample_path(name))
    assert main(["analyze", path, "--no-cache", *argv, "-f", fmt, "-o", str(target)]) == 0
    return target.read_bytes()


def _method_file(report: Report, tmp_path: Path, fmt: str) -> bytes:
    target = tmp_path / f"api.{fmt}"
    if fmt == "md":
        return report.to_markdown().encode("utf-8")
    if fmt == "html":
        report.write_html(target)
    else:
        report.write_json(target)
    return target.read_bytes()


@pytest.mark.parametrize("choice", list(CHOICES))
@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_methods_write_what_analyze_writes(
    sample_trace: Callable[[str], Trace], tmp_path: Path, name: str, fmt: str, choice: str
) -> None:
    argv = CHOICES[choice][0]
    trace = sample_trace(name)
    report = _report(sample_trace, name, choice)
    assert report.trace is trace
    cli = _cli_file(tmp_path, name, fmt, argv)
    assert _method_file(report, tmp_path, fmt) == cli
    text = cli.decode("utf-8")
    assert name in text
    if fmt == "json":
        data = json.loads(text)
        assert (data["schema_version"], data["kind"]) == (2, "report")
        assert data["inputs"] == {"trace": str(sample_path(name))}
        assert data["sections"] == list(report.sections)
        expected_options = {
            "all": {"only": None, "skip": None},
            "skip": {"only": None, "skip": ["bound", "memory", "compile"]},
            "only": {"only": ["overview", "gaps", "findings"], "skip": None},
        }[choice]
        assert data["options"] == expected_options
        assert "trace" not in data  # the layout-1 key of to_dict() is not what is written
    if fmt == "html":
        assert "<figcaption>GPU timeline</figcaption>" in text  # drawn from the trace
        assert ("<figcaption>Allocated memory</figcaption>" in text) == (name == "train_eager")
        assert "<section id='counters'><h2>Memory and GPU counters</h2>" in text
        assert "<figcaption>Power</figcaption>" in text  # an NVML counter chart
        assert NO_TRACE_SECTION not in text
    if choice == "only":
        assert list(report.sections) == ["overview", "gaps", "findings"]
    if choice == "skip":
        assert not {"bound", "memory", "compile"} & set(report.sections)


def test_to_dict_keeps_its_layout(sample_trace: Callable[[str], Trace], tmp_path: Path) -> None:
    report = ti.analyze(sample_trace("fix_bmm_after"), only=["overview"])
    data = report.to_dict()
    assert (data["schema_version"], data["trace"]) == (1, report.trace_path)
    report.write_json(tmp_path / "report.json")
    written = json.loads((tmp_path / "report.json").read_text())
    # The envelope carries the same results and headline under the common header.
    assert written["overview"] == data["overview"] and written["headline"] == data["headline"]
    assert written["config"] == data["config"]


def test_report_refers_to_its_trace_weakly(tmp_path: Path) -> None:
    trace = load(sample_path("fix_bmm_after"), cache=False)
    report = ti.analyze(trace)
    assert report.trace is trace
    del trace
    gc.collect()
    assert report.trace is None  # the report did not keep the frames alive
    report.write_html(tmp_path / "page.html")
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert NO_TRACE_SECTION in page and "<figcaption>GPU timeline</figcaption>" not in page
    assert "<p class='unavailable'>Not available: the trace was not at hand" in page
    # The plots drawn from the sections' results are still there.
    assert "<figcaption>Top kernels by GPU time</figcaption>" in page


def test_a_pickled_report_still_writes_its_files(
    sample_trace: Callable[[str], Trace], tmp_path: Path
) -> None:
    trace = sample_trace("train_eager")
    report = ti.analyze(trace, skip=["compile"])
    report.headline  # noqa: B018  (a cached value travels with the report)
    restored: Report = pickle.loads(pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored.trace is None and report.trace is trace
    assert restored.trace_path == report.trace_path and list(restored) == list(report)
    assert restored.headline.verdict == report.headline.verdict

    skip = ["--skip", "compile"]
    for fmt in ("md", "json"):
        assert _method_file(restored, tmp_path, fmt) == _cli_file(
            tmp_path, "train_eager", fmt, skip
        )
    cli_page = _cli_file(tmp_path, "train_eager", "html", skip)
    restored.write_html(tmp_path / "given.html", trace=trace)
    assert (tmp_path / "given.html").read_bytes() == cli_page
    restored.write_html(tmp_path / "bare.html")
    bare = (tmp_path / "bare.html").read_text(encoding="utf-8")
    assert NO_TRACE_SECTION in bare
    assert "Allocated memory" not in bare and "NVML utilisation" not in bare
    # A copy is pickled the same way: it lets go of the trace too.
    assert copy.copy(report).trace is None


def test_a_given_trace_wins_over_the_remembered_one(
    sample_trace: Callable[[str], Trace], tmp_path: Path
) -> None:
    report = _report(sample_trace, "fix_bmm_after", "all")
    other = sample_trace("train_eager")
    report.write_html(tmp_path / "page.html", trace=other)
    # train_eager's memory events, not in fix_bmm_after, reach the page.
    assert "<figcaption>Allocated memory</figcaption>" in (tmp_path / "page.html").read_text()


def test_a_failed_write_leaves_no_file(
    sample_trace: Callable[[str], Trace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = _report(sample_trace, "fix_bmm_after", "all")

    def fail(src: str, dst: object) -> None:
        assert Path(src).read_bytes()  # the whole text was written to the temporary file first
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", fail)
    for write in (report.write_html, report.write_json):
        with pytest.raises(OSError, match="disk full"):
            write(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary one beside it


def test_a_failed_write_keeps_the_old_file(
    sample_trace: Callable[[str], Trace], tmp_path: Path, disk_fails_half_way: None
) -> None:
    report = _report(sample_trace, "fix_bmm_after", "all")
    target = tmp_path / "report.html"
    target.write_text("old\n")
    for write in (report.write_html, report.write_json):
        with pytest.raises(OSError, match="disk full"):
            write(target)
        assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_a_page_renders_to_the_same_bytes_every_time(sample_trace: Callable[[str], Trace]) -> None:
    """Nothing on the page counts how many charts the process drew before (the roofline's
    clip path is named after the chart)."""
    from traceinsight.render import formats

    trace = sample_trace("fix_bmm_after")
    report = ti.analyze(trace, only=["bound"])
    first = formats.render(report, "html", trace=trace)
    assert "clipPath id='clip-" in first
    assert formats.render(report, "html", trace=trace) == first
