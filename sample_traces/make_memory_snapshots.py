"""Record real CUDA allocator snapshots for ``traceinsight memory``: a leak, fragmentation, an OOM.

    python3 sample_traces/make_memory_snapshots.py --out /tmp/memory

writes ``leak.pickle``, ``fragmentation.pickle`` and ``oom.pickle`` (each with a ``.json``
beside it saying what the scenario did, which the tests check the answers against). Each
scenario runs in a process of its own, so that none sees another's memory, with
``torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")``.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

MiB = 1 << 20
GiB = 1 << 30

LEAK_STEPS = 8
LEAK_BYTES = 1 * MiB  # one 256 x 1024 float32 tensor kept per step
FRAG_COUNT = 40
OOM_CHUNK_BYTES = 2 * GiB


def leak_step(kept: list[Any], x: Any) -> None:
    row = x.sum(dim=0, keepdim=True)
    kept.append(row.expand(256, 1024).contiguous())  # the leak: kept for ever, 1 MiB a step


def leak(torch: Any) -> dict[str, Any]:
    """A training-like loop that keeps one tensor per step in a list."""
    kept: list[Any] = []
    for _ in range(LEAK_STEPS):
        x = torch.randn(1024, 1024, device="cuda")  # 4 MiB, freed each step
        y = x @ x  # 4 MiB, freed each step
        leak_step(kept, y)
        del x, y
    torch.cuda.synchronize()
    return {"steps": LEAK_STEPS, "leak_bytes": LEAK_BYTES, "leak_function": "leak_step"}


def fragmentation_sizes() -> list[int]:
    # 0.5 to 8 MiB in steps of 512 KiB: whole multiples of the allocator's 512-byte rounding
    return [(1 + (i * 7) % 16) * 512 * 1024 for i in range(FRAG_COUNT)]


def fragmentation(torch: Any) -> dict[str, Any]:
    """Interleaved allocations of varying sizes, every other one freed: holes in the segments."""
    sizes = fragmentation_sizes()
    tensors = [torch.empty(size, dtype=torch.uint8, device="cuda") for size in sizes]
    for i in range(0, len(tensors), 2):
        tensors[i] = None
    torch.cuda.synchronize()
    kept = sum(sizes[1::2])
    return {"sizes": sizes, "kept_bytes": kept, "held": [t is not None for t in tensors]}


def oom(torch: Any) -> dict[str, Any]:
    """2 GiB allocations until the device is full; the error is caught, then the snapshot taken."""
    chunks: list[Any] = []
    message = ""
    try:
        while True:
            chunks.append(torch.empty(OOM_CHUNK_BYTES, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError as exc:
        message = str(exc).splitlines()[0]
    return {"chunk_bytes": OOM_CHUNK_BYTES, "chunks": len(chunks), "error": message}


SCENARIOS = {"leak": leak, "fragmentation": fragmentation, "oom": oom}


def run_one(name: str, out: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("make_memory_snapshots.py needs a CUDA GPU")
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    facts = SCENARIOS[name](torch)
    torch.cuda.memory._dump_snapshot(str(out / f"{name}.pickle"))
    torch.cuda.memory._record_memory_history(enabled=None)
    facts.update(
        torch=torch.__version__,
        device=torch.cuda.get_device_name(0),
        max_entries=100_000,
        stacks="python",
    )
    (out / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--scenario", choices=sorted(SCENARIOS), help="run one scenario in this process"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.scenario:
        run_one(args.scenario, args.out)
        return 0
    failed = 0
    for name in SCENARIOS:
        done = subprocess.run(
            [sys.executable, __file__, "--out", str(args.out), "--scenario", name], check=False
        )
        path = args.out / f"{name}.pickle"
        size = f"{path.stat().st_size:,} bytes" if path.exists() else "not written"
        print(f"{name}: exit {done.returncode}, {path} {size}", flush=True)
        failed += done.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
