"""The JSON envelope's ``options`` record the ``--only`` / ``--skip`` names of ``analyze``
(one trace) as given; the other commands keep their own options. On the real
``sample_traces/mm_sweep_64.json.gz``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight.cli.app import main
from traceinsight.render import envelope

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_analyze_records_only_and_skip_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(sample_path("mm_sweep_64"))
    data = _json(capsys, "analyze", path, "--only", "gaps,overview", "--only", "steps")
    assert data["options"] == {"only": ["gaps", "overview", "steps"], "skip": None}
    assert data["sections"] == ["overview", "gaps", "steps"]  # shown in report order

    data = _json(capsys, "analyze", path, "--skip", "bound, findings")
    assert data["options"] == {"only": None, "skip": ["bound", "findings"]}
    assert "bound" not in data["sections"] and "bound" not in data and "findings" not in data

    data = _json(capsys, "analyze", path, "--only", "overview")
    assert data["options"] == {"only": ["overview"], "skip": None}
    assert list(data)[:6] == [
        "schema_version",
        "traceinsight_version",
        "kind",
        "inputs",
        "options",
        "sections",
    ]


def test_analyze_without_a_choice_records_nulls(sample_trace: Any) -> None:
    report = ti.analyze(sample_trace("mm_sweep_64"))
    assert envelope.document(report)["options"] == {"only": None, "skip": None}
    chosen = ti.analyze(
        sample_trace("mm_sweep_64"), only=(n for n in ["overview"])
    )  # any iterable, read once
    assert list(chosen.sections) == ["overview"]
    assert envelope.document(chosen)["options"] == {"only": ["overview"], "skip": None}
    assert "only" not in chosen.to_dict()  # the envelope's, not the report body's


def test_other_commands_keep_their_options(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(sample_path("mm_sweep_64"))
    assert _json(capsys, "gaps", path, "--limit", "3")["options"] == {"limit": 3}
    assert _json(capsys, "bound", path)["options"] == {"by": "region"}


def test_options_are_documented() -> None:
    doc = (DOCS / "report.md").read_text(encoding="utf-8")
    assert '"only": null' in doc and "`only`" in doc and "`skip`" in doc
