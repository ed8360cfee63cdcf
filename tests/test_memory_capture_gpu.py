"""`traceinsight capture --memory` on a CUDA device: the snapshot beside the trace is written
when the script finishes, when it raises and when it runs out of memory, and its answers match
what the script allocated. Skipped without torch and a CUDA device."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

from traceinsight.analysis.snapshot.report import analyze_snapshot  # noqa: E402
from traceinsight.trace.snapshot.load import load_memory_snapshot  # noqa: E402

MIB = 1 << 20

# Four training-like steps that keep one 64 MiB tensor per step (a leak), then ``ENDING``.
SCRIPT = """
import sys, torch
kept = []
w = torch.randn(1024, 1024, device="cuda", requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(6):
    x = torch.randn(1024, 1024, device="cuda")
    loss = (x @ w).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    kept.append(torch.empty(16 * 1024 * 1024, device="cuda"))  # 64 MiB kept per step
ENDING
"""
ENDINGS = {
    "finishes": "print('done')",
    "raises": "raise RuntimeError('planted failure')",
    "oom": "torch.empty(1 << 50, dtype=torch.uint8, device='cuda')",
}


def _capture(tmp_path: Path, ending: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / f"train_{ending}.py"
    script.write_text(textwrap.dedent(SCRIPT).replace("ENDING", ENDINGS[ending]))
    trace = tmp_path / f"run_{ending}.json.gz"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "traceinsight", "capture", "--memory", "--no-nvml", "--wait", "0",
         "--warmup", "1", "--active", "3", "-o", str(trace), "--", sys.executable, str(script)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    return done, trace


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_capture_memory_writes_the_snapshot_beside_the_trace(tmp_path: Path, ending: str) -> None:
    done, trace = _capture(tmp_path, ending)
    assert (done.returncode == 0) == (ending == "finishes"), done.stderr
    snapshot = trace.with_name(trace.name.replace(".json.gz", ".memory.pickle"))
    assert snapshot.is_file(), done.stderr
    assert "memory snapshot written to" in done.stderr
    assert trace.is_file(), done.stderr  # the trace too, whatever the script did
    report = analyze_snapshot(load_memory_snapshot(snapshot))
    # six 64 MiB tensors were alive when the script ended (or failed)
    assert report.peak.peak_allocated_bytes >= 6 * 64 * MIB
    if ending == "oom":
        assert report.oom.ooms >= 1 and report.oom.request_bytes >= 1 << 50
    else:
        assert report.oom.ooms == 0
    leaks = report.leaks.leaks
    assert leaks is not None and leaks.height, report.leaks.method
    grows = leaks.filter(pl.col("growth_per_iteration_bytes") >= 64 * MIB)
    assert grows.height and any(f"train_{ending}.py" in site for site in grows["site"]), leaks
