"""``traceinsight analyze``: formats, output files, section selection, layout, NO_COLOR, progress."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from tests.conftest import sample_path
from traceinsight.analysis.registry import ANALYSES
from traceinsight.cli.app import main
from traceinsight.render import progress

SGR = re.compile(r"\x1b\[([0-9;]*)m")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def colour_codes(text: str) -> list[str]:
    """SGR parameters that set a colour (foreground/background), ignoring bold and resets."""
    found = []
    for params in SGR.findall(text):
        parts = params.split(";")
        i = 0
        while i < len(parts):
            p = parts[i]
            if p in ("38", "48"):
                found.append(";".join(parts[i : i + 3]))
                i += 3 if i + 1 < len(parts) and parts[i + 1] == "5" else 5
                continue
            if p.isdigit() and (30 <= int(p) <= 37 or 40 <= int(p) <= 47 or 90 <= int(p) <= 107):
                found.append(p)
            i += 1
    return found


def test_json_report_has_headline_and_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "analyze", str(sample_path("dataloader_w0")), "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert (data["schema_version"], data["kind"]) == (2, "report")
    assert data["inputs"] == {"trace": str(sample_path("dataloader_w0"))}
    assert data["sections"] == [spec.name for spec in ANALYSES]
    for name in data["sections"]:
        assert data[name]["schema_version"] >= 1
        assert isinstance(data[name]["available"], bool)
    assert "data loading" in data["headline"]["verdict"]
    assert data["headline"]["findings"]


def test_terminal_report_starts_with_the_verdict(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run(capsys, "analyze", str(sample_path("tiny_kernels")))
    assert code == 0
    first_panel = out.split("\n\n")[0]
    assert "Verdict" in out.splitlines()[0]
    assert "launch" in first_panel
    for spec in ANALYSES:
        assert spec.title in out


@pytest.mark.parametrize("width", [60, 200])
def test_terminal_layout_fits_the_width(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.delenv("NO_COLOR", raising=False)
    code, out, _ = run(capsys, "analyze", str(sample_path("train_eager")))
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width
    # Narrow terminals wrap; wide ones use the room rather than a fixed layout.
    assert max(len(line) for line in lines) > width * 0.8


def test_no_color_removes_colour_codes(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    _, coloured, _ = run(capsys, "analyze", str(sample_path("tiny_kernels")))
    assert colour_codes(coloured), "FORCE_COLOR run should be coloured, or this test proves nothing"
    monkeypatch.setenv("NO_COLOR", "1")
    _, plain, _ = run(capsys, "analyze", str(sample_path("tiny_kernels")))
    assert colour_codes(plain) == []
    assert "Verdict" in plain


def test_only_and_skip_select_sections(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(sample_path("gemm_bf16"))
    _, out, _ = run(capsys, "analyze", path, "-f", "json", "--only", "overview,gaps")
    assert json.loads(out)["sections"] == ["overview", "gaps"]
    _, out, _ = run(capsys, "analyze", path, "-f", "json", "--skip", "ops", "--skip", "kernels")
    names = json.loads(out)["sections"]
    assert "ops" not in names and "kernels" not in names and "overview" in names
    code, _, err = run(capsys, "analyze", path, "--only", "nonsense")
    assert code == 2 and "unknown section" in err


def test_output_file_refuses_to_overwrite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    path = str(sample_path("gemm_bf16"))
    code, out, _ = run(capsys, "analyze", path, "-f", "md", "-o", str(target))
    assert code == 0 and out.strip() == f"Wrote {target}"
    text = target.read_text()
    assert text.startswith("# traceinsight report") and "## Trace overview" in text
    target.write_text("keep me")
    code, _, err = run(capsys, "analyze", path, "-f", "md", "-o", str(target))
    assert code == 2 and "--force" in err and target.read_text() == "keep me"
    code, out, _ = run(capsys, "analyze", path, "-f", "md", "-o", str(target), "--force")
    assert code == 0 and target.read_text().startswith("# traceinsight report")


def test_terminal_format_to_file_is_plain_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "report.txt"
    code, _, _ = run(capsys, "analyze", str(sample_path("gemm_bf16")), "-o", str(target))
    assert code == 0
    text = target.read_text()
    assert "\x1b[" not in text and "Verdict" in text


def test_html_format(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    code, _, _ = run(capsys, "analyze", str(sample_path("regimes")), "-f", "html", "-o", str(target))
    assert code == 0
    page = target.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") >= 4
    assert "roofline" in page and "GPU timeline" in page


def test_unknown_format_and_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "analyze", str(sample_path("gemm_bf16")), "-f", "pdf")
    assert code == 2 and "unknown format" in err
    code, _, err = run(capsys, "analyze", str(tmp_path / "missing.json"))
    assert code == 1 and err.startswith("error:")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_for_big_files_on_a_terminal(tmp_path: Path) -> None:
    small = tmp_path / "t.json"
    small.write_bytes(b"x" * 1000)
    assert not progress.wants_progress(small, FakeTTY())
    assert progress.wants_progress(small, FakeTTY(), min_bytes=100)
    assert not progress.wants_progress(small, io.StringIO(), min_bytes=100)
    assert not progress.wants_progress(tmp_path / "missing.json", FakeTTY(), min_bytes=0)


def test_progress_writes_one_line_per_phase_off_a_terminal() -> None:
    lines = io.StringIO()
    with progress.phases(True, stream=lines) as phase:
        assert isinstance(phase, progress.PhaseLines)
        phase("reading big.json")
        phase("analysing: gaps")
        phase.load_progress("decoding", 10, 100, 5)
        phase.load_progress("decoding", 50, 100, 25)  # same phase again: no second line
    assert lines.getvalue().splitlines() == ["reading big.json", "analysing: gaps", "decoding"]
    quiet = FakeTTY()
    with progress.phases(False, stream=quiet) as phase:
        phase("reading")
    assert quiet.getvalue() == ""


def test_analyze_reports_its_phases_in_order(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Progress forced on; stderr under capsys is not a terminal, so each phase is one line.
    monkeypatch.setattr(progress, "wants_progress", lambda *args, **kwargs: True)
    out = tmp_path / "r.json"
    code, _, err = run(capsys, "analyze", str(sample_path("tiny_kernels")), "--format", "json",
                       "--no-cache", "-o", str(out))
    assert code == 0
    lines = err.splitlines()
    assert lines[0].startswith("reading tiny_kernels.json.gz (")
    assert lines[1:3] == ["reading", "decoding"]
    assert lines[-1] == "rendering json"
    analysed = [line.removeprefix("analysing: ") for line in lines[3:-1]]
    assert all(line.startswith("analysing: ") for line in lines[3:-1])
    trace_specs = [spec for spec in ANALYSES if spec.kind == "trace"]
    assert sorted(analysed) == sorted(spec.name for spec in trace_specs)
    for spec in trace_specs:  # every analysis after the ones whose results it reads
        assert all(analysed.index(needed) < analysed.index(spec.name) for needed in spec.requires)
