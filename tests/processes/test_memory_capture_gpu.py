"""`traceinsight capture --memory` live on a CUDA device: sample_traces/record_capture_memory.py
run again into a temporary folder, its runs checked as the recorded ones are
(tests/integration/test_memory_capture_recorded.py). Skipped without torch and a CUDA device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from tests.integration.test_memory_capture_recorded import ENDINGS, check_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_capture_memory_live(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "sample_traces" / "record_capture_memory.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads((tmp_path / "facts.json").read_text())
    for ending in ENDINGS:
        check_run(tmp_path, facts, ending)
