"""The analyses that test files share (tests/analyses.py) are the analyses themselves: the same
report as analysing the trace afresh, a fresh copy each call, never reused across code versions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests import analyses
from tests.conftest import sample_path
from traceinsight.analysis.report import analyze
from traceinsight.trace.loader import load


def test_a_shared_analysis_is_the_analysis_of_the_trace() -> None:
    path = sample_path("mm_sweep_64")
    shared = analyses.analysed(path)
    fresh = analyze(load(path, cache=False))
    assert json.dumps(shared.to_dict(), sort_keys=True, default=str) == json.dumps(fresh.to_dict(), sort_keys=True, default=str)
    # each call its own copy: a test that changes its report changes no other test's
    assert analyses.analysed(path) is not shared


def test_the_run_shares_one_directory_of_analyses() -> None:
    shared = os.environ.get(analyses.ENV_DIR)
    assert shared and Path(shared).is_dir()
    analyses.analysed(sample_path("mm_sweep_64"))
    assert list(Path(shared).glob("*.pickle"))


def test_the_key_follows_the_code_and_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    path = sample_path("mm_sweep_64")
    key = analyses._key(path, None)
    assert analyses._key(path, ("kernels",)) != key
    monkeypatch.setattr(analyses, "code_fingerprint", lambda: "another version")
    assert analyses._key(path, None) != key
