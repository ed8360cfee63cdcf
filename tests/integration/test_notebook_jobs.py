"""Jupyter display of a job report and of a series of runs, on the real four-rank gloo jobs
(``sample_traces/job_straggler.rank*``, ``job_balanced.rank*``; see sample_traces/README.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import traceinsight as ti
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.render.formats import render
from traceinsight.render.job.html import job_body, series_body

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
STRAGGLER = str(SAMPLES / "job_straggler.rank*.json.gz")
BALANCED = str(SAMPLES / "job_balanced.rank*.json.gz")


@pytest.fixture(scope="module")
def straggler_report() -> JobReport:
    return ti.analyze(ti.load_job(STRAGGLER, engine="serial"))


@pytest.fixture(scope="module")
def series() -> SeriesResult:
    return ti.compare([STRAGGLER, BALANCED], engine="serial")


def _as_page_headings(fragment: str) -> str:
    return fragment.replace("<h4>", "<h2>").replace("</h4>", "</h2>")


def test_job_report_displays_its_html_page_content(straggler_report: JobReport) -> None:
    fragment = straggler_report._repr_html_()
    # A fragment for a notebook cell, as Report's: no document around it.
    assert fragment.startswith("<div class='ti-nb'><style>") and fragment.endswith("</div>")
    assert "<html" not in fragment and "<body" not in fragment
    # The same content as the HTML page: heatmap with rank 2 framed in each of the 8 steps,
    # the rank table, the straggler, collective wait and findings tables.
    page = render(straggler_report, "html")
    body = job_body(straggler_report)
    assert body in page and body in _as_page_headings(fragment)
    assert "device step time per rank and step" in fragment
    assert fragment.count("straggler of this step") == 8
    for title in ("Ranks (per step)", "Straggler: its own time per step", "Collective wait (whole trace)", "Job findings"):
        assert f"<h4>{title}</h4>" in fragment
    assert "rank_straggler" in fragment and "host-side collective spans" in fragment


def test_job_report_display_follows_the_chosen_sections() -> None:
    report = ti.analyze(ti.load_job(BALANCED, engine="serial"), only=["rank_table"])
    fragment = report._repr_html_()
    assert "<h4>Ranks (per step)</h4>" in fragment and "Collective wait" not in fragment
    assert "straggler of this step" not in fragment  # no straggler in the balanced job


def test_series_displays_its_html_page_content(series: SeriesResult) -> None:
    fragment = series._repr_html_()
    assert fragment.startswith("<div class='ti-nb'><style>") and "<html" not in fragment
    page = render(series, "html")
    body = series_body(series)
    assert body in page and body in _as_page_headings(fragment)
    assert "median step time per run" in fragment and "<svg" in fragment
    for title in ("Runs (against run 0)", "Breakdown per step", "Top findings per run"):
        assert f"<h4>{title}</h4>" in fragment
    assert "job_balanced.rank*" in fragment and "faster" in fragment


def test_series_display_without_the_runs_section(series: Any) -> None:
    from dataclasses import replace

    fragment = replace(series, sections=("breakdown",))._repr_html_()
    assert "Breakdown per step" in fragment
    assert "Runs (against run 0)" not in fragment and "<svg" not in fragment
