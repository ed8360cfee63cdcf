"""Record `traceinsight capture --memory` on a CUDA machine, three times: a training-like script
that keeps a 64 MiB tensor per step and then finishes, raises, or runs out of memory. Each run
writes its trace and, beside it, NAME.memory.pickle (tests/integration/test_memory_capture_recorded.py
checks them against what the script did).

    python3 sample_traces/record_capture_memory.py --out sample_traces/memory/capture
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import torch
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    facts = {"steps": 6, "kept_bytes_per_step": 64 << 20, "oom_request_bytes": 1 << 50, "runs": {}}
    for ending, line in ENDINGS.items():
        script = args.out / f"train_{ending}.py"
        script.write_text(SCRIPT.replace("ENDING", line))
        trace = args.out / f"run_{ending}.json.gz"
        done = subprocess.run(
            [sys.executable, "-m", "traceinsight", "capture", "--memory", "--no-nvml", "--wait", "0", "--warmup", "1",
             "--active", "3", "--force", "-o", str(trace), "--", sys.executable, str(script)],
            capture_output=True, text=True, env=env, timeout=300,
        )
        facts["runs"][ending] = {"returncode": done.returncode, "stderr_tail": done.stderr[-600:]}  # type: ignore[index]
        print(ending, done.returncode, done.stderr[-300:], flush=True)
    (args.out / "facts.json").write_text(json.dumps(facts, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
