"""Bad input: a clear one-line TraceFormatError naming the file, exit code 1, no traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight.cli.app import main
from traceinsight.errors import TraceFormatError

VALID = json.dumps({"traceEvents": [{"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})


def _cases(tmp: Path) -> dict[str, tuple[Path, str]]:
    real = sample_path("tiny_kernels").read_bytes()
    cases = {
        "not_json": (b"this is not json", "not JSON"),
        "truncated_json": (VALID[: len(VALID) // 2].encode(), "truncated"),
        "truncated_gzip": (real[: len(real) // 2], "truncated gzip"),
        "corrupt_gzip": (real[:20] + bytes(200) + real[220:], "gzip"),
        "not_a_trace": (json.dumps({"hello": "world"}).encode(), "no 'traceEvents'"),
        "events_not_list": (json.dumps({"traceEvents": {"a": 1}}).encode(), "not a list"),
        "empty_events": (json.dumps({"traceEvents": []}).encode(), "no events"),
        "scalar_top": (b"42", "not JSON"),
        "empty_file": (b"", "empty"),
        "whitespace_file": (b"  \n ", "empty"),
    }
    out = {}
    for name, (content, reason) in cases.items():
        path = tmp / f"{name}.json"
        path.write_bytes(content)
        out[name] = (path, reason)
    return out


@pytest.mark.parametrize(
    "case",
    ["not_json", "truncated_json", "truncated_gzip", "corrupt_gzip", "not_a_trace", "events_not_list",
     "empty_events", "scalar_top", "empty_file", "whitespace_file"],
)
def test_bad_files_raise_trace_format_error(case: str, tmp_path: Path) -> None:
    path, reason = _cases(tmp_path)[case]
    with pytest.raises(TraceFormatError) as info:
        ti.load(path, cache=False)
    message = str(info.value)
    assert str(path) in message
    assert reason.lower() in message.lower()
    assert "\n" not in message


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="directory"):
        ti.load(tmp_path)
    with pytest.raises(TraceFormatError, match="no such file"):
        ti.load(tmp_path / "missing.json")


def test_cli_prints_one_line_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [')[:-6])
    code = main(["analyze", str(path)])
    captured = capsys.readouterr()
    assert code == 1
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_cli_verbose_shows_the_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(TraceFormatError):
        main(["-v", "analyze", str(path)])


def test_cli_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "--format", "pdf", str(sample_path("tiny_kernels"))]) == 2
    assert "unknown format" in capsys.readouterr().err
    assert main(["analyze", "--no-such-option"]) == 2
