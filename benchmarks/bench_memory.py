"""Memory snapshot benchmark: load time and peak memory of ``traceinsight memory`` on a big pickle.

Synthesises an allocator snapshot of about ``--target-mb`` megabytes shaped like the ones
PyTorch writes: a trace of alloc / free_requested / free_completed events (with a segment
event now and then) each carrying its Python stack; stacks drawn from a few thousand distinct
ones, 8 to 30 frames deep, over files under ``torch/`` and the user's code; each distinct frame
dict shared by the stacks that hold it, as PyTorch's pickles share them. Then, each in a fresh
Python process so that its peak RSS is its own, it measures:

- ``pickle``: ``pickle.load`` of the file alone (what any reader pays first);
- ``load``: ``traceinsight.load_memory_snapshot`` (restricted unpickler + frames);
- ``analyze``: load plus every answer (``analyze_memory_snapshot``), as the command runs it.
- ``command``: ``traceinsight memory FILE -f json -o ...`` end to end (load, every answer, the
  report rendered and written), in the process, as a user runs it.

Seconds (wall clock, and the CPU time of the process, all its threads) leave out the imports;
peak RSS (in MB, and as a ratio to the file's size) includes them. The machine's one-minute
load average when each step ended is printed beside it: on a machine other work keeps busy the
wall seconds grow with it, the CPU seconds much less.

    python benchmarks/bench_memory.py --target-mb 200
    python benchmarks/bench_memory.py --snapshot path/to/snapshot.pickle[.gz]

A gzip-compressed snapshot is measured as it is (``pickle`` then reads it through ``gzip``).
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000

_CHILD = r"""
import json, os, resource, sys, time
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")
mode, path = sys.argv[1], sys.argv[2]
# imports before the clock starts (their memory still counts in the peak)
import pickle
if mode != "pickle":
    import polars, traceinsight, traceinsight.analysis.snapshot.report, traceinsight.trace.snapshot.load
if mode == "command":
    import tempfile, traceinsight.cli.app
start = time.perf_counter()
cpu_start = time.process_time()
if mode == "pickle":
    import gzip
    with open(path, "rb") as probe:
        opener = gzip.open if probe.read(2) == b"\x1f\x8b" else open  # a .gz snapshot: decompressed as read
    with opener(path, "rb") as handle:
        data = pickle.load(handle)
    n = sum(len(t) for t in data["device_traces"])
elif mode == "command":
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "memory.json")
        code = traceinsight.cli.app.main(["memory", path, "-f", "json", "-o", out])
        if code != 0:
            raise SystemExit(f"traceinsight memory exited {code}")
        with open(out) as handle:
            n = json.load(handle)["memory_snapshot"]["events"]
else:
    snap = traceinsight.load_memory_snapshot(path)
    n = snap.events.height
    if mode == "analyze":
        report = traceinsight.analyze_memory_snapshot(snap)
        n = report.events
elapsed = time.perf_counter() - start
cpu = time.process_time() - cpu_start
# VmHWM is this process's own peak; ru_maxrss keeps the parent's across exec on Linux, so a run
# that has just synthesised the pickle would report the parent's peak for every child
try:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "peak_rss_bytes": peak, "events": n, "load_average": os.getloadavg()[0]}))
"""


def _frames_pool(rng: random.Random, count: int) -> list[dict[str, Any]]:
    torch_files = [
        f"/opt/conda/lib/python3.11/site-packages/torch/{d}/{m}.py"
        for d in ("nn/modules", "_tensor", "autograd", "optim", "utils/data", "_dynamo")
        for m in ("module", "linear", "conv", "functional", "graph", "adamw", "sgd", "dataloader")
    ]
    user_files = [
        f"/home/user/project/{m}.py"
        for m in ("train", "model", "data", "loss", "attention", "blocks", "utils")
    ]
    names = [
        "forward",
        "_call_impl",
        "backward",
        "step",
        "__call__",
        "train_step",
        "loss_fn",
        "collate",
        "attention",
        "mlp",
        "run",
        "main",
    ]
    pool = []
    for _ in range(count):
        library = rng.random() < 0.7
        filename = rng.choice(torch_files if library else user_files)
        pool.append({"filename": filename, "line": rng.randint(1, 2000), "name": rng.choice(names)})
    return pool


def _stacks(
    rng: random.Random, frames: list[dict[str, Any]], count: int
) -> list[list[dict[str, Any]]]:
    return [rng.sample(frames, rng.randint(8, 30)) for _ in range(count)]


def _events(
    rng: random.Random, stacks: list[list[dict[str, Any]]], count: int, start_us: int
) -> list[dict[str, Any]]:
    """``count`` events: allocations, and frees of earlier ones, with their stacks (a new list
    per event, holding the shared frame dicts)."""
    events: list[dict[str, Any]] = []
    live: list[tuple[int, int]] = []
    addr = 0x7F00_0000_0000
    time_us = start_us
    weights = [1.0 / (i + 1) for i in range(len(stacks))]  # a few sites allocate most
    picks = rng.choices(range(len(stacks)), weights=weights, k=count)
    for i in range(count):
        time_us += rng.randint(1, 50)
        stack = list(stacks[picks[i]])
        if live and (rng.random() < 0.48 or len(live) > 5000):
            a, size = live.pop(rng.randrange(len(live)))
            events.append(
                {
                    "action": "free_requested",
                    "addr": a,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": stack,
                }
            )
            events.append(
                {
                    "action": "free_completed",
                    "addr": a,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us + 1,
                    "frames": stack,
                }
            )
        elif rng.random() < 0.002:
            size = rng.choice((2, 20, 64)) << 20
            events.append(
                {
                    "action": "segment_alloc",
                    "addr": addr,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": stack,
                }
            )
            addr += size
        else:
            size = rng.choice((512, 4096, 1 << 20, 4 << 20, 16 << 20))
            events.append(
                {
                    "action": "alloc",
                    "addr": addr,
                    "size": size,
                    "stream": 0,
                    "time_us": time_us,
                    "frames": stack,
                }
            )
            live.append((addr, size))
            addr += size
    return events


def _snapshot(events: list[dict[str, Any]]) -> dict[str, Any]:
    segments = [
        {
            "device": 0,
            "address": 0x7E00_0000_0000 + i * (64 << 20),
            "total_size": 64 << 20,
            "allocated_size": 32 << 20,
            "active_size": 32 << 20,
            "requested_size": 32 << 20,
            "stream": 0,
            "segment_type": "large",
            "segment_pool_id": (0, 0),
            "is_expandable": False,
            "frames": [],
            "blocks": [
                {
                    "address": 0x7E00_0000_0000 + i * (64 << 20),
                    "size": 32 << 20,
                    "requested_size": 32 << 20,
                    "state": "active_allocated",
                    "frames": events[i % len(events)]["frames"] if events else [],
                },
                {
                    "address": 0x7E00_0000_0000 + i * (64 << 20) + (32 << 20),
                    "size": 32 << 20,
                    "requested_size": 0,
                    "state": "inactive",
                    "frames": [],
                },
            ],
        }
        for i in range(200)
    ]
    return {
        "segments": segments,
        "device_traces": [events],
        "allocator_settings": {"expandable_segments": False},
    }


def synthesise(path: Path, target_mb: float, seed: int = 0) -> None:
    rng = random.Random(seed)
    frames = _frames_pool(rng, 20_000)
    stacks = _stacks(rng, frames, 3_000)
    # bytes per event, measured on a sample of the same shape (the shared frames paid once)
    sample = _events(random.Random(seed + 1), stacks, 100_000, 0)
    per_event = (
        len(pickle.dumps(_snapshot(sample), protocol=5)) / 100_000
    )  # per draw: a free is two events
    count = max(int(target_mb * MB / per_event), 1)
    events = _events(rng, stacks, count, 1_000_000)
    with open(path, "wb") as handle:
        pickle.dump(_snapshot(events), handle, protocol=5)


def measure(mode: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--target-mb",
        type=float,
        default=200.0,
        help="size of the synthesised pickle, in MB (10^6 bytes)",
    )
    parser.add_argument(
        "--snapshot", type=Path, help="measure this snapshot instead of synthesising one"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="where to write the synthesised pickle (default .bench/snapshot_<N>mb.pickle)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each measurement (the fastest is reported)"
    )
    parser.add_argument("--modes", default="pickle,load,analyze,command")
    args = parser.parse_args(argv)
    path = args.snapshot
    if path is None:
        path = args.out or ROOT / ".bench" / f"snapshot_{args.target_mb:g}mb.pickle"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            synthesise(path, args.target_mb)
    size = path.stat().st_size
    print(f"{path}: {size / MB:,.1f} MB")
    print(
        f"{'mode':<8} {'events':>11} {'seconds':>8} {'CPU s':>8} {'peak RSS MB':>12} {'RSS / file':>11} {'load':>6}"
    )
    for mode in args.modes.split(","):
        runs = [measure(mode, path) for _ in range(max(args.repeat, 1))]
        best = min(runs, key=lambda r: r["seconds"])
        rss = max(r["peak_rss_bytes"] for r in runs)
        print(
            f"{mode:<8} {best['events']:>11,} {best['seconds']:>8.2f} {best['cpu_seconds']:>8.2f} "
            f"{rss / MB:>12,.0f} {rss / size:>10.2f}x {best['load_average']:>6.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
