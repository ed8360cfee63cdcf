"""`traceinsight capture --memory` as recorded on an H200 by
sample_traces/record_capture_memory.py: a script that keeps a 64 MiB tensor per step, then
finishes, raises, or asks for 2**50 bytes. Each run left its trace and its snapshot beside it,
whatever the script did, and the snapshot's answers are what the script did."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from traceinsight.analysis.snapshot.report import analyze_snapshot
from traceinsight.trace.loader import load
from traceinsight.trace.snapshot.load import load_memory_snapshot

RECORDED = Path(__file__).resolve().parents[2] / "sample_traces" / "memory" / "captured"
FACTS = json.loads((RECORDED / "facts.json").read_text())
SCRIPT = (Path(__file__).resolve().parents[2] / "sample_traces" / "record_capture_memory.py").read_text()


ENDINGS = ("finishes", "raises", "oom")


@pytest.mark.parametrize("ending", ENDINGS)
def test_capture_memory_left_the_trace_and_the_snapshot(ending: str) -> None:
    check_run(RECORDED, FACTS, ending)


def check_run(folder: Path, facts: dict[str, Any], ending: str) -> None:
    """What one run of the recording script left in ``folder`` against what it did."""
    run = facts["runs"][ending]
    # the script's own exit status is passed on: 0 when it finished, 1 when it raised or ran out of memory
    assert run["returncode"] == (0 if ending == "finishes" else 1)
    assert "memory snapshot written to" in run["stderr_tail"] and "trace written to" in run["stderr_tail"]
    trace = load(folder / f"run_{ending}.json.gz", cache=False)
    assert trace.kernels.height > 0
    report = analyze_snapshot(load_memory_snapshot(folder / f"run_{ending}.memory.pickle"))
    kept = facts["kept_bytes_per_step"]
    # six 64 MiB tensors alive at the end, with the weights, the input and the gradients
    assert report.peak.peak_allocated_bytes >= facts["steps"] * kept
    if ending == "oom":
        assert report.oom.ooms >= 1 and report.oom.request_bytes == facts["oom_request_bytes"]
    else:
        assert report.oom.ooms == 0
    leaks = report.leaks.leaks
    assert leaks is not None and leaks.height == 1
    # the leak is the line of the script that keeps the tensor, growing by it every step
    line = next(i for i, text in enumerate(SCRIPT.split('SCRIPT = """', 1)[1].splitlines(), 1) if "kept.append" in text)
    site, growth = leaks.select("site", "growth_per_iteration_bytes").row(0)
    assert site.endswith(f"train_{ending}.py:{line} (<module>)") and growth == kept
