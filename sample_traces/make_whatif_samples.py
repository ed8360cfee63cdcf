"""Record the what-if validation loops: host work of h ms and GPU work of g ms per step, either
overlapping across steps (the host runs ahead) or serialized by a per-step synchronize.

On a CUDA machine:   python3 sample_traces/make_whatif_samples.py --out sample_traces/whatif
On a CPU-only one:   python3 sample_traces/make_whatif_samples.py --smoke --out /tmp/whatif

Each variant's step is first timed outside the profiler with CUDA events (mean ms/step over 20
steps after warm-up), then profiled. The base traces (``whatif_overlap``, ``whatif_sync``) are
what a replay reads; the variants (host work halved, GPU work halved, the sync dropped) are the
measured answers its predictions are checked against. The table is written as
``whatif_timings.json`` beside the traces.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step
from traceinsight.capture import Schedule, profile

SCHEDULE = Schedule(wait=1, warmup=2, active=6)


@dataclass(frozen=True)
class Loop:
    name: str
    host_ms: float
    gpu_ms: float
    sync: bool
    what: str


def spin(ms: float) -> None:
    """Busy host work (Python), like preprocessing or a slow dispatch path."""
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def calibrate(device: torch.device, n: int, smoke: bool) -> float:
    """ms of one fp32 matmul of n×n on this device (the unit of GPU work)."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(5):
        a @ b
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(5):
            a @ b
        return (time.perf_counter() - t0) * 1e3 / 5
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        a @ b
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / 50


def make_step(loop: Loop, device: torch.device, n: int, unit_ms: float):  # type: ignore[no-untyped-def]
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device) / n**0.5
    kernels = max(1, round(loop.gpu_ms / unit_ms))

    def step() -> None:
        with torch.profiler.record_function("host_work"):
            spin(loop.host_ms)
        with torch.profiler.record_function("gpu_work"):
            x = a
            for _ in range(kernels):
                x = x @ b
        if loop.sync:
            with torch.profiler.record_function("sync"):
                torch.cuda.synchronize() if device.type == "cuda" else None

    return step, kernels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "whatif")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; runs on CPU")
    ap.add_argument("--host-ms", type=float, default=6.0)
    ap.add_argument("--gpu-ms", type=float, default=10.0)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    device = torch.device("cuda" if cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 matmuls: a steady, calibrated unit of work
    n = 2048 if cuda else 64
    h, g = args.host_ms, args.gpu_ms
    if args.smoke:
        h, g = 1.0, 1.0
    unit_ms = calibrate(device, n, args.smoke)
    loops = [
        Loop("whatif_overlap", h, g, False, "host h then GPU g per step, no sync: steps overlap"),
        Loop("whatif_overlap_half_host", h / 2, g, False, "overlap, host work halved"),
        Loop("whatif_overlap_half_gpu", h, g / 2, False, "overlap, GPU work halved"),
        Loop("whatif_sync", h, g, True, "host h then GPU g then torch.cuda.synchronize() per step"),
        Loop("whatif_sync_half_host", h / 2, g, True, "sync, host work halved"),
        Loop("whatif_sync_half_gpu", h, g / 2, True, "sync, GPU work halved"),
        Loop("whatif_sync_dropped", h, g, False, "the sync loop with its synchronize dropped"),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}, unit {unit_ms:.3f} ms", flush=True)
    rows = []
    for loop in loops:
        step, kernels = make_step(loop, device, n, unit_ms)
        ms = time_step(step, cuda, warmup=5, iters=20)
        path = args.out / f"{loop.name}.json.gz"
        n_steps = SCHEDULE.skip_first + SCHEDULE.wait + SCHEDULE.warmup + SCHEDULE.active
        with profile(path, schedule=SCHEDULE, record_shapes=True) as prof:
            for _ in range(n_steps):
                step()
                prof.step()
        if cuda:
            torch.cuda.synchronize()
        written = prof.paths[0] if prof.paths else path
        row = {"name": loop.name, "what": loop.what, "host_ms": loop.host_ms, "gpu_ms_target": loop.gpu_ms,
               "kernels_per_step": kernels, "sync": loop.sync, "measured_ms": round(ms, 3), "bytes": written.stat().st_size}
        rows.append(row)
        print(f"{loop.name}: {ms:.3f} ms/step  ({kernels} kernels, host {loop.host_ms} ms, sync={loop.sync})  {written.name}", flush=True)
    (args.out / "whatif_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
