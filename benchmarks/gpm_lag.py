"""Where GPM samples land relative to the kernels they measure (run on a Hopper GPU).

Idle for 0.6 s, then ~0.8 s of bf16 GEMMs, then idle again, all under
``traceinsight.capture.profile``. Prints each NVML utilisation and GPM sample's time relative
to the first GEMM kernel, so the rise and fall of ``sm_util_pct`` / ``tensor_util_pct`` can be
compared with the kernels' span (0 .. end) to read off how far GPM values trail their stamps.
It then fits that lag: the shift, in GPM windows, that best matches each sample's
``sm_util_pct`` (relative to its busy level) to the share of its shifted window covered by
the GEMMs (least squares over a grid of shifts).

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
            shown = {
                k: v
                for k, v in event["args"].items()
                if k in ("gpu_pct", "sm_util_pct", "tensor_util_pct")
            }
            values = " ".join(f"{k}={v:.1f}" for k, v in shown.items())
            print(f"{event['name']:18s} t={(event['ts'] - first) / 1e3:9.1f} ms  {values}")
    gpm = [
        ((e["ts"] - first) * 1e3, e["args"]["sm_util_pct"])
        for e in doc["traceEvents"]
        if e.get("ph") == "C" and e.get("name") == "gpm" and "sm_util_pct" in e["args"]
    ]
    window_ns = float(doc["traceinsight"]["capture"].get("interval_s", 0.1)) * 1e9
    lag = fit_lag(gpm, (last - first) * 1e3, window_ns)
    if lag is None:
        print("GPM lag: not enough GPM samples to fit")
    else:
        print(
            f"GPM lag: {lag[0]:.2f} windows ({lag[0] * window_ns / 1e6:.0f} ms), rms error {lag[1]:.3f}"
        )
    return 0


def fit_lag(
    samples: list[tuple[float, float]], busy_end_ns: float, window_ns: float
) -> tuple[float, float] | None:
    """(lag in windows, rms error): a sample stamped t describes [t - w/2, t + w/2] - lag * w."""
    if len(samples) < 4:
        return None
    level = max(v for _, v in samples) or 1.0
    best: tuple[float, float] | None = None
    for k in range(-100, 301):
        shift = k / 100
        err = 0.0
        for t, v in samples:
            lo = t - window_ns / 2 - shift * window_ns
            covered = max(0.0, min(lo + window_ns, busy_end_ns) - max(lo, 0.0)) / window_ns
            err += (v / level - covered) ** 2
        rms = (err / len(samples)) ** 0.5
        if best is None or rms < best[1]:
            best = (shift, rms)
    return best


if __name__ == "__main__":
    sys.exit(main())
