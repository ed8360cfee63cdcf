"""The generated docs match the code: the CLI reference and the JSON report schema."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date() -> None:
    gen = load_script("gen_cli_reference")
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == gen.generate(), "stale: run `nox -s docs` (or python docs/gen_cli_reference.py)"


def test_cli_reference_lists_every_command() -> None:
    import typer.main

    from traceinsight.cli.app import app

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    for name in typer.main.get_command(app).commands:  # type: ignore[attr-defined]
        assert f"## {name}\n" in text


def test_report_schema_block_is_up_to_date() -> None:
    gen = load_script("gen_report_schema")
    doc = (DOCS / "report.md").read_text(encoding="utf-8")
    assert gen.render(doc) == doc, "stale: run `nox -s docs` (or python docs/gen_report_schema.py)"


def documented_keys(doc: str) -> dict[str, set[str]]:
    """Section name → keys listed in its table (top-level keys under '')."""
    block = doc[doc.index("schema:begin") : doc.index("schema:end")]
    keys: dict[str, set[str]] = {"": set()}
    current = ""
    for line in block.splitlines():
        if m := re.match(r"### `(\w+)`", line):
            current = m.group(1)
            keys[current] = set()
        elif m := re.match(r"\| `([\w<> ]+)` \|", line):
            keys[current].add(m.group(1))
    return keys


def test_documented_keys_match_a_real_json_report() -> None:
    from tests.analyses import analysed
    from tests.conftest import sample_path
    from traceinsight.render.envelope import document

    keys = documented_keys((DOCS / "report.md").read_text(encoding="utf-8"))
    data = document(analysed(sample_path("train_eager")))  # the run's one analysis
    sections = data["sections"]
    assert set(data) - set(sections) == keys[""] - {"<section name>"}
    for name in sections:
        assert set(data[name]) == keys[name], f"section {name}"


@pytest.mark.parametrize("page", ["index.md", "quickstart.md", "report.md", "export.md", "lessons.md"])
def test_doc_pages_exist_and_link_targets_exist(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([\w./-]+\.(?:md|ipynb))(?:#[\w-]+)?\)", text):
        assert (DOCS / target).exists(), f"{page} links to missing {target}"


def test_index_links_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w./-]+)(?:#[\w-]+)?\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"} | {"notebook.ipynb"}
    assert pages <= linked, f"not linked from docs/index.md: {sorted(pages - linked)}"


def test_pasted_outputs_come_from_commands_that_still_work() -> None:
    refresh = load_script("refresh_outputs")
    for page in refresh.PAGES:
        text = (DOCS / page).read_text(encoding="utf-8")
        commands = refresh.commands(text)
        assert commands, f"{page} has no refreshed output blocks"
        for block in refresh.BLOCK.finditer(text):
            assert block.group("body").startswith(f"$ {block.group('cmd').partition(' | ')[0]}\n"), "stale: run `nox -s docs` (or python docs/refresh_outputs.py)"
