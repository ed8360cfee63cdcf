"""Small promises of the CLI: exit codes, refusing to overwrite, default names, help text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import sample_path
from traceinsight.cli.app import main
from traceinsight.cli.export import default_output


def _help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def test_help_shows_flags_without_a_type_and_arguments_by_name(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    out = _help(capsys, "analyze")
    assert "<bool>" not in out
    assert "{trace}" not in out and "analyze [OPTIONS] TRACE" in out
    assert "[device] table of peaks" in out  # the markup no longer eats it
    only = out[out.index("--only"):out.index("--skip")]
    for name in ("overview", "gaps", "bound", "findings"):
        assert name in only


def test_capture_steps_from_help_is_whole(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = re.sub(r"[│\s]+", " ", _help(capsys, "capture"))
    assert "current_profiler().step()" in out


def test_sql_error_is_a_data_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", str(sample_path("tiny_kernels")), "select * from nosuchtable"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tiny_kernels" in err and "SQL error" in err


@pytest.mark.parametrize(
    "content",
    ['[{"ph":"X","name":"a","ts":"soon","dur":-5,"pid":"x","tid":null}]', '{"traceEvents": []}'],
    ids=["every-event-unusable", "no-events"],
)
def test_nothing_usable_is_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["analyze", "--no-cache", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and str(path) in captured.err


def test_export_names_its_output_next_to_the_trace() -> None:
    assert default_output(Path("/x/run.json.gz")) == Path("/x/run.pftrace")
    assert default_output(Path("run.pt.trace.json")) == Path("run.pt.trace.pftrace")


def test_capture_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json.gz"
    out.write_bytes(b"keep me")
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not run')\n")
    assert main(["capture", "-o", str(out), "--", "python", str(script)]) == 2
    assert out.read_bytes() == b"keep me"
    assert "--force" in capsys.readouterr().err


def test_bound_top_limits_the_region_rows(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["bound", str(sample_path("train_eager")), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#2" in out  # third region: whole trace, two steps
    assert "ProfilerStep#4" not in out.split("(whole trace):")[0]


def test_compile_labels_frame_ids(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["compile", str(sample_path("train_compiled"))]) == 0
    out = capsys.readouterr().out
    assert "Dynamo frame ids" in out
