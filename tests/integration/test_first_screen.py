"""``analyze`` on a terminal: the first 80×50 screen holds the verdict and the findings; piped
output, ``--full`` and ``--only`` stay whole."""

from __future__ import annotations

import io
import re
import sys

import pytest
from rich.console import Console

from tests.analyses import analysed
from tests.conftest import sample_path
from traceinsight.cli.app import main
from traceinsight.render import formats
from traceinsight.render.glance import glance_renderable

SCREEN_LINES = 50
# Different shapes of verdict: many findings, none, idle-bound, launch-bound, a job's rank.
SAMPLES = ("train_eager", "regimes", "gemm_bf16", "fix_launch_before", "fix_item_sync_before", "tiny_kernels", "job_straggler.rank2")


def squeezed(text: str) -> str:
    """Text without whitespace and box drawing, so that wrapped lines compare as one."""
    return re.sub(r"[\s│─╭╮╰╯]", "", text)


def screen(report, width: int = 80) -> str:  # type: ignore[no-untyped-def]
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, color_system=None, soft_wrap=False).print(glance_renderable(report, narrow=width < 80))
    return buf.getvalue()


@pytest.mark.parametrize("name", SAMPLES)
def test_first_screen_fits_and_holds_the_answer(name: str, sample_trace) -> None:  # type: ignore[no-untyped-def]
    report = analysed(sample_path(name))
    text = screen(report)
    lines = text.splitlines()
    assert len(lines) <= SCREEN_LINES, f"{name}: {len(lines)} lines\n{text}"
    assert max(len(line) for line in lines) <= 80
    assert squeezed(report.headline.verdict) in squeezed(text)
    for finding in report.findings.findings[:5]:
        assert squeezed(finding.title) in squeezed(text), finding.id
    for section in report.sections:
        if section != "findings":
            assert re.search(rf"^\W*{section}\s", text, re.M), section


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str, tty: bool) -> str:
    monkeypatch.setattr(formats, "on_terminal", lambda: tty)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_cli_on_a_terminal_prints_the_first_screen(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(sample_path("train_eager"))
    out = run(capsys, monkeypatch, "analyze", path, tty=True)
    assert len(out.splitlines()) <= SCREEN_LINES
    assert "Verdict" in out and "Findings" in out and "--full" in out
    assert "Device time breakdown" not in out  # the sections' panels are one line each


def test_cli_piped_full_and_only_stay_whole(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(sample_path("train_eager"))
    piped = run(capsys, monkeypatch, "analyze", path, tty=False)
    full = run(capsys, monkeypatch, "analyze", path, "--full", tty=True)
    assert len(piped.splitlines()) > 2 * SCREEN_LINES and "Device time breakdown" in piped
    assert len(full.splitlines()) > 2 * SCREEN_LINES and "Device time breakdown" in full
    only = run(capsys, monkeypatch, "analyze", path, "--only", "kernels", tty=True)
    assert "Kernels" in only and "--full" not in only


def test_on_terminal_reads_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert formats.on_terminal() is False
