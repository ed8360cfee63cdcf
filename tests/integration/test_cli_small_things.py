"""What a new user runs into first: help that wraps at the terminal, short reprs at a Python
prompt, format names in any case, an SQL error that names the tables, docs that install right."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, sample_path
from traceinsight.cli.app import main
from traceinsight.render.formats import check


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_reflows_to_a_wide_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(capsys, "analyze", "--help")
    assert code == 0
    # One sentence of the docstring that the source wraps after "operators,": on one line at 200.
    assert "steps, operators, kernels, memory, bound regions" in out


def test_help_wraps_at_a_narrow_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = run(capsys, "analyze", "--help")
    assert code == 0 and max(len(line.rstrip()) for line in out.splitlines()) <= 60


def test_reports_have_a_short_repr(sample_trace) -> None:  # type: ignore[no-untyped-def]
    import traceinsight as ti

    report = ti.analyze(sample_trace("gemm_bf16"))
    text = repr(report)
    assert len(text) < 1500, len(text)
    assert report.headline.verdict in text and "findings" in text
    series = ti.compare([sample_path("fix_tf32_before"), sample_path("fix_tf32_after")], only=["runs"])
    assert len(repr(series)) < 300 and "2 run(s)" in repr(series)


def test_job_report_has_a_short_repr() -> None:
    import traceinsight as ti

    job = ti.analyze(ti.load_job([sample_path(f"job_balanced.rank{i}") for i in range(4)]))
    text = repr(job)
    assert len(text) < 300 and "4 rank(s)" in text and "stragglers" in text


@pytest.mark.parametrize("spelled", ["HTML", "Html", " json", "MD"])
def test_formats_in_any_case(spelled: str) -> None:
    assert check("report", spelled) == spelled.strip().lower()


def test_upper_case_format_on_the_command_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    code, _, err = run(capsys, "analyze", str(sample_path("gemm_bf16")), "-f", "HTML", "-o", str(target))
    assert code == 0, err
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_sql_error_on_an_unknown_table_lists_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "sql", str(sample_path("gemm_bf16")), "SELECT * FROM kernel")
    assert code == 1
    assert "tables: events, kernels, counters, memory" in err


def test_docs_do_not_call_a_core_dependency_optional() -> None:
    block = (ROOT / "pyproject.toml").read_text().split("dependencies = [", 1)[1].split("]", 1)[0]
    core = {m.lower() for m in re.findall(r'"([A-Za-z0-9_.-]+)', block)}
    assert "perfetto" in core
    for doc in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for line in doc.read_text().splitlines():
            for name in core:
                assert not (f"pip install {name}" in line and "optional" in line), f"{doc.name}: {line}"
                assert f"`pip install {name}`" not in line, f"{doc.name}: {line}"


def test_readme_test_command_works_without_pip_into_the_system_python() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip install nox" not in readme
    assert "python3 -m venv" in readme.split("Run the tests", 1)[1].split("```", 2)[1]
    assert "Chromium" in readme and "test_html_browser.py" in readme
