"""Where GPM samples land relative to the kernels they measure (run on a Hopper GPU).

Idle for 0.6 s, then ~0.8 s of bf16 GEMMs, then idle again, all under
``traceinsight.capture.profile``. Prints each NVML utilisation and GPM sample's time relative
to the first GEMM kernel, so the rise and fall of ``sm_util_pct`` / ``tensor_util_pct`` can be
compared with the kernels' span (0 .. end) to read off how far GPM values trail their stamps.

    python3 benchmarks/gpm_lag.py /tmp/gpm_lag.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from traceinsight.capture import profile


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpm_lag.json.gz")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    torch.cuda.synchronize()
    with profile(out, record_shapes=False):
        time.sleep(0.6)
        for _ in range(500):
            a @ b
        torch.cuda.synchronize()
        time.sleep(0.6)
    doc = json.loads(gzip.decompress(out.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    first = min(e["ts"] for e in kernels)
    last = max(e["ts"] + e["dur"] for e in kernels)
    print(f"GEMM kernels run from 0 to {(last - first) / 1e3:.1f} ms")
    for event in doc["traceEvents"]:
        if event.get("ph") == "C" and event.get("name") in ("gpm", "nvml.utilization"):
            shown = {k: v for k, v in event["args"].items() if k in ("gpu_pct", "sm_util_pct", "tensor_util_pct")}
            values = " ".join(f"{k}={v:.1f}" for k, v in shown.items())
            print(f"{event['name']:18s} t={(event['ts'] - first) / 1e3:9.1f} ms  {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
