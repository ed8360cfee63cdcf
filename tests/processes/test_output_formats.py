"""The format registry: a new output format is one module and one registry line; the format
registry picks formats by name and by suffix, and lists them in each command's help."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from traceinsight.errors import UsageError
from traceinsight.render import formats
from traceinsight.render.outputs import registry

PACKAGE = Path(__file__).resolve().parents[2] / "traceinsight"

NEW_FORMAT = '''
"""Tab-separated facts: one line per key of the JSON envelope's header."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import ALL_KINDS, RenderOptions


@dataclass(frozen=True)
class TsvFormat:
    name: str = "tsv"
    suffixes: tuple[str, ...] = (".tsv",)
    binary: bool = False
    kinds: tuple[str, ...] = ALL_KINDS
    label: str = "tsv (the header as tab-separated lines)"

    def render(self, document: Any, options: RenderOptions) -> str:
        from traceinsight.render.envelope import document as envelope

        data = envelope(document)
        return "".join(f"{key}\\t{data[key]}\\n" for key in ("kind", "inputs", "sections"))


FORMAT = TsvFormat()
'''


def test_a_new_format_is_one_module_and_one_registry_line(tmp_path: Path) -> None:
    copy = tmp_path / "traceinsight"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "render" / "outputs" / "tsv.py").write_text(NEW_FORMAT, encoding="utf-8")
    reg = copy / "render" / "outputs" / "registry.py"
    text = reg.read_text(encoding="utf-8")
    line = "for _fmt in (terminal.FORMAT, json.FORMAT, markdown.FORMAT, html.FORMAT, csv.FORMAT, perfetto.FORMAT):"
    assert line in text
    text = text.replace("from traceinsight.render.outputs import csv,", "from traceinsight.render.outputs import tsv, csv,")
    reg.write_text(text.replace(line, line.replace("perfetto.FORMAT)", "perfetto.FORMAT, tsv.FORMAT)")), encoding="utf-8")

    sample = PACKAGE.parent / "sample_traces" / "mm_sweep_64.json.gz"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "200", "TRACEINSIGHT_CACHE_DIR": str(tmp_path / "cache")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "traceinsight", *args], env=env, capture_output=True, text=True, check=False, cwd=tmp_path)

    by_suffix = run("compile", str(sample), "-o", str(tmp_path / "out.tsv"))
    assert by_suffix.returncode == 0, by_suffix.stderr
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[0] == "kind\tcompile"
    by_name = run("compile", str(sample), "-f", "tsv")
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.startswith("kind\tcompile\ninputs\t{'trace': ")
    helped = run("compile", "--help")
    assert "tsv (the header as tab-separated lines)" in " ".join(helped.stdout.split())


def test_formats_by_kind_name_and_suffix() -> None:
    assert formats.formats_of("report") == ("terminal", "json", "md", "html")
    assert formats.formats_of("job") == ("terminal", "json", "md", "html", "perfetto")
    assert formats.formats_of("sql") == ("terminal", "json", "csv")
    found = registry.by_suffix(".HTML")
    assert found is not None and found.name == "html"
    assert registry.by_suffix(".log") is None
    assert formats.check("report", None, output=Path("r.md")) == "md"
    assert formats.check("report", None, output=Path("r.log")) == "terminal"
    with pytest.raises(UsageError, match=r"writes a binary file: give it with -o FILE\.pftrace"):
        formats.check("job", "perfetto")
    assert formats.check("job", "perfetto", output=Path("j.pftrace")) == "perfetto"
    with pytest.raises(ValueError, match=r"suffix \.json already names 'json'"):
        registry.register(registry.FORMATS["csv"].__class__(name="other", suffixes=(".json",)))  # type: ignore[call-arg]


def test_format_help_lists_what_the_kind_takes() -> None:
    assert registry.format_help("compile") == "terminal or json; default: from -o's suffix, else terminal"
    assert registry.format_help("report", also="job") == (
        "terminal, json, md (Markdown) or html (self-contained page with plots); "
        "a job also perfetto (a job's ranks on one timeline); default: from -o's suffix, else terminal"
    )
