"""``traceinsight memory``: exit codes, one-line errors and every output format."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.snapshot_builder import MiB
from tests.unit.test_memory_snapshot import LEAK_SITE, RunsCode, fragmented, leaky
from traceinsight.cli.app import main


@pytest.fixture
def frag(tmp_path: Path) -> Path:
    b = fragmented()
    b.oom(20 * MiB, 6 * MiB)  # the free tails (24 MiB) would hold it, no free block (8 MiB) does
    return b.dump(tmp_path / "frag.pickle", protocol=5)


def run(args: list[str], capsys: Any) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_terminal_names_peak_leak_fragmentation_and_oom(frag: Path, capsys: Any) -> None:
    code, out, err = run(["memory", str(frag)], capsys)
    assert (code, err) == (0, "")
    for text in (
        "peak allocated  76.0 MiB at event #25",
        "expandable segments            off; would not help much",
        "short by              14.0 MiB",
        "fix: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ):
        assert text in out


def test_json_envelope(frag: Path, tmp_path: Path, capsys: Any) -> None:
    other = leaky(6).dump(tmp_path / "leak.pickle")
    code, out, _ = run(["memory", str(frag), "--compare", str(other), "-f", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert (data["kind"], data["inputs"], data["sections"]) == (
        "memory_snapshot",
        {"snapshot": str(frag), "compare": str(other)},
        ["memory_snapshot"],
    )
    body = data["memory_snapshot"]
    assert body["peak"]["peak_allocated_bytes"] == 76 * MiB
    assert body["oom"]["fix"]["kind"] == "expandable_segments"
    assert body["compare"]["peak_change_bytes"] == (10 - 76) * MiB
    assert "timeline" not in body


def test_leak_in_markdown(tmp_path: Path, capsys: Any) -> None:
    path = leaky(6).dump(tmp_path / "leak.pickle")
    code, out, _ = run(["memory", str(path), "-f", "md"], capsys)
    assert code == 0
    assert f"| {LEAK_SITE} | 1.0 MiB | 1.0 MiB → 5.0 MiB | 4 of 4 |" in out


def test_html_to_a_file_with_the_plot(frag: Path, tmp_path: Path, capsys: Any) -> None:
    target = tmp_path / "out.html"
    code, out, _ = run(["memory", str(frag), "-f", "html", "-o", str(target)], capsys)
    assert code == 0 and out.strip() == f"Wrote {target}"
    html = target.read_text()
    assert (
        html.startswith("<!DOCTYPE html>")
        and "<svg" in html
        and "memory over time by allocation site" in html
    )
    code, _, err = run(["memory", str(frag), "-f", "html", "-o", str(target)], capsys)
    assert code == 2 and "exists; pass --force" in err
    assert run(["memory", str(frag), "-f", "html", "-o", str(target), "--force"], capsys)[0] == 0


def test_bad_input_is_one_line_and_exit_1(tmp_path: Path, capsys: Any) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text('{"traceEvents": []}')
    code, out, err = run(["memory", str(bad)], capsys)
    assert code == 1 and out == ""
    assert err == f"error: {bad}: a profiler trace (JSON), not a memory snapshot pickle: read it with `traceinsight analyze`\n"


def test_pickle_that_runs_code_exit_1_nothing_run(tmp_path: Path, capsys: Any) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps([RunsCode(marker)], protocol=5))
    code, _, err = run(["memory", str(evil)], capsys)
    assert code == 1
    assert (
        err.startswith(
            f"error: {evil}: not a memory snapshot: it asks to load {os.system.__module__}.system"
        )
        and err.count("\n") == 1
    )
    assert not marker.exists()


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    from traceinsight.errors import TraceFormatError

    with pytest.raises(TraceFormatError):
        main(["-v", "memory", str(tmp_path / "missing.pickle")])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "csv"], "unknown format 'csv'"),
        (["--iterations", "2"], "--iterations must be 3 or more"),
        (["--device", "3"], "has no device 3; it has 0"),
    ],
)
def test_usage_errors_exit_2(frag: Path, capsys: Any, args: list[str], message: str) -> None:
    code, _, err = run(["memory", str(frag), *args], capsys)
    assert code == 2 and message in err
