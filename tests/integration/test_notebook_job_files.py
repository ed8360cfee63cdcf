"""A job report's and a series' ``to_markdown`` / ``write_html`` / ``write_json`` give exactly
the files ``traceinsight analyze DIR`` and ``traceinsight compare RUN...`` write, on real
traces: the two-rank NCCL DDP run (``sample_traces/ddp_train.rank*``), the four-rank gloo job
(``job_straggler.rank*``) and the matmul sweep (``mm_sweep_*``); see sample_traces/README.md.

The JSON envelope holds no timestamp or other value that changes from run to run, so every
file is compared whole, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceinsight as ti
from traceinsight import atomic
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.lib.words import run_labels
from traceinsight.cli.app import main

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
DDP = [str(SAMPLES / f"ddp_train.rank{r}.json.gz") for r in (0, 1)]
STRAGGLER = str(SAMPLES / "job_straggler.rank*.json.gz")
SWEEP = [str(SAMPLES / f"mm_sweep_{n}.json.gz") for n in (64, 256, 1024)]


def _cli_file(tmp_path: Path, name: str, *argv: str) -> bytes:
    target = tmp_path / f"cli-{name}"
    assert main([*argv, "-o", str(target)]) == 0
    return target.read_bytes()


def _method_files(obj: JobReport | SeriesResult, tmp_path: Path) -> dict[str, bytes]:
    obj.write_html(tmp_path / "api.html")
    obj.write_json(tmp_path / "api.json")
    return {
        "md": obj.to_markdown().encode("utf-8"),
        "html": (tmp_path / "api.html").read_bytes(),
        "json": (tmp_path / "api.json").read_bytes(),
    }


@pytest.fixture(scope="module")
def ddp_report() -> JobReport:
    return ti.analyze(ti.load_job(DDP, engine="serial"))


@pytest.fixture(scope="module")
def sweep_series() -> SeriesResult:
    return ti.compare(SWEEP, engine="serial")


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_job_report_methods_write_what_analyze_writes(
    ddp_report: JobReport, tmp_path: Path, fmt: str
) -> None:
    cli = _cli_file(tmp_path, fmt, "analyze", *DDP, "--engine", "serial", "-f", fmt)
    assert _method_files(ddp_report, tmp_path)[fmt] == cli
    text = cli.decode("utf-8")
    # Real content, not two empty documents: rank 1 holds rank 0 back in this run.
    assert "rank_straggler" in text
    if fmt == "json":
        data = json.loads(text)
        assert data["kind"] == "job" and data["inputs"]["ranks"] == DDP
        assert data["options"] == {"only": None, "skip": None}
    if fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and "device step time per rank and step" in text


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_series_methods_write_what_compare_writes(
    sweep_series: SeriesResult, tmp_path: Path, fmt: str
) -> None:
    cli = _cli_file(tmp_path, fmt, "compare", *SWEEP, "--engine", "serial", "-f", fmt)
    assert _method_files(sweep_series, tmp_path)[fmt] == cli
    text = cli.decode("utf-8")
    # each run named as compare names it: by what differs between the paths
    assert all(label in text for label in run_labels(SWEEP))
    if fmt == "json":
        data = json.loads(text)
        assert (data["kind"], data["inputs"]["runs"]) == ("series", SWEEP)
        assert data["series"]["sections"] == ["runs", "breakdown", "findings"]
    if fmt == "html":
        assert "median step time per run" in text


def test_chosen_sections_reach_the_written_files(tmp_path: Path) -> None:
    """With ``only`` / ``skip``, the gloo job's and the series' files still match the CLI's
    byte for byte, and their envelopes record the names as given."""
    report = ti.analyze(ti.load_job(STRAGGLER, engine="serial"), skip=["stragglers,job_findings"])
    report.write_json(tmp_path / "job.json")
    cli = _cli_file(
        tmp_path,
        "job.json",
        "analyze",
        STRAGGLER,
        "--engine",
        "serial",
        "--skip",
        "stragglers,job_findings",
        "-f",
        "json",
    )
    assert (tmp_path / "job.json").read_bytes() == cli
    data = json.loads(cli)
    assert data["options"] == {"only": None, "skip": ["stragglers", "job_findings"]}
    assert data["sections"] == ["rank_table", "collective_wait", "collective_match", "failed"]
    assert "findings" not in data and "job_findings" not in data and "stragglers" not in data
    assert report.to_markdown().encode("utf-8") == _cli_file(
        tmp_path,
        "job.md",
        "analyze",
        STRAGGLER,
        "--engine",
        "serial",
        "--skip",
        "stragglers,job_findings",
        "-f",
        "md",
    )

    series = ti.compare(SWEEP[:2], engine="serial", only=["runs"])
    series.write_json(tmp_path / "series.json")
    cli = _cli_file(
        tmp_path,
        "series.json",
        "compare",
        *SWEEP[:2],
        "--engine",
        "serial",
        "--only",
        "runs",
        "-f",
        "json",
    )
    assert (tmp_path / "series.json").read_bytes() == cli
    data = json.loads(cli)
    assert data["options"] == {"only": ["runs"], "skip": None}
    assert data["series"]["sections"] == ["runs"] and "only" not in data["series"]


def test_a_failed_write_leaves_no_file(
    ddp_report: JobReport,
    sweep_series: SeriesResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(src: str, dst: object) -> None:
        assert Path(src).read_bytes()  # the whole text was written to the temporary file first
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", fail)
    for obj in (ddp_report, sweep_series):
        for write in (obj.write_html, obj.write_json):
            with pytest.raises(OSError, match="disk full"):
                write(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []  # neither the file nor a temporary one beside it


def test_a_failed_write_keeps_the_old_file(
    ddp_report: JobReport, tmp_path: Path, disk_fails_half_way: None
) -> None:
    target = tmp_path / "job.json"
    target.write_text("old\n")
    with pytest.raises(OSError, match="disk full"):
        ddp_report.write_json(target)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["job.json"]


def test_written_files_get_the_mode_of_the_cli_files(ddp_report: JobReport, tmp_path: Path) -> None:
    cli = tmp_path / "cli.json"
    assert main(["analyze", *DDP, "--engine", "serial", "-f", "json", "-o", str(cli)]) == 0
    ddp_report.write_json(tmp_path / "api.json")
    assert (tmp_path / "api.json").stat().st_mode == cli.stat().st_mode
