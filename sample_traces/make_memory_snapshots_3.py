"""Record allocator snapshots of two more workloads under three ``PYTORCH_CUDA_ALLOC_CONF``
settings, a real out-of-memory error under a per-process cap, and (optionally) a large
snapshot, for ``traceinsight memory`` to be checked against.

    python3 sample_traces/make_memory_snapshots_3.py --out /tmp/memory3 [--large-s 90]

Each scenario runs in a process of its own (the allocator reads ``PYTORCH_CUDA_ALLOC_CONF``
once, when CUDA starts) and writes ``NAME.pickle.gz`` with ``NAME.json`` beside it: what the
process measured of itself (``torch.cuda.max_memory_reserved``, ``memory_stats()``).

- ``cnn_default``, ``cnn_expandable``, ``cnn_maxsplit``: a ResNet-50 (``torchvision.models.resnet50``,
  built from its definition, no weights) trained with SGD and momentum on fixed 224x224 batches;
- ``ms_default``, ``ms_expandable``, ``ms_maxsplit``: a ResNet-18 trained with AdamW on batches
  whose image size changes every step (multi-scale training: a variable-shape workload);
- ``oom_cap``: the ResNet-50 under a 6 GiB ``torch.cuda.set_per_process_memory_fraction`` cap,
  two steps of batch 32 then a batch of 128 that runs out of memory; the snapshot is dumped in
  the ``except`` branch;
- ``large`` (with ``--large-s``): the ResNet-18 run for that many seconds with ``stacks="all"``
  and a deep history, written gzip-compressed and split into 15 MiB parts.

The default runs and the OOM record ``stacks="all"`` (C++ frames too); the others record
Python stacks only, which does not change what the allocator does. Needs a CUDA GPU and
``torchvision``; ``--cpu-check`` runs the training code on the CPU with a small stand-in model,
to check the script without a GPU.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MiB = 1 << 20
GiB = 1 << 30
SEED = 1234
CNN_STEPS = 6
CNN_BATCH = 64
MS_STEPS = 8
MS_BATCH = 32
MS_SIZES = (128, 160, 192, 224, 256, 288, 320, 352, 384)
OOM_CAP_BYTES = 6 * GiB
OOM_BATCHES = (32, 32, 128)
PART_BYTES = 15 * MiB

SETTINGS = {
    "cnn_default": "",
    "cnn_expandable": "expandable_segments:True",
    "cnn_maxsplit": "max_split_size_mb:64",
    "ms_default": "",
    "ms_expandable": "expandable_segments:True",
    "ms_maxsplit": "max_split_size_mb:64",
    "oom_cap": "",
    "large": "",
}
STACKS_ALL = {"cnn_default", "ms_default", "oom_cap", "large"}


def _model(torch: Any, depth: int, device: str) -> Any:
    try:
        import torchvision
    except ImportError:
        if device != "cpu":
            raise
        # --cpu-check without torchvision: a stand-in with the same training code path
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(8, 1000),
        ).to(device)
    build = torchvision.models.resnet50 if depth == 50 else torchvision.models.resnet18
    return build(weights=None, num_classes=1000).to(device)


def train_step(torch: Any, model: Any, optimizer: Any, batch: int, size: int, device: str) -> None:
    images = torch.randn(batch, 3, size, size, device=device)
    labels = torch.randint(0, 1000, (batch,), device=device)
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _sync(torch: Any, device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def cnn(torch: Any, device: str) -> dict[str, Any]:
    torch.manual_seed(SEED)
    model = _model(torch, 50, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    times = []
    for _ in range(CNN_STEPS):
        _sync(torch, device)
        start = time.perf_counter()
        train_step(torch, model, optimizer, CNN_BATCH, 224, device)
        _sync(torch, device)
        times.append(time.perf_counter() - start)
    return {"model": "resnet50", "steps": CNN_STEPS, "batch": CNN_BATCH, "size": 224, "step_s": times}


def _sizes(n: int) -> list[int]:
    rng = random.Random(SEED)
    return [rng.choice(MS_SIZES) for _ in range(n)]


def multiscale(torch: Any, device: str, seconds: float = 0.0) -> dict[str, Any]:
    torch.manual_seed(SEED)
    model = _model(torch, 18, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sizes = _sizes(100_000 if seconds else MS_STEPS)
    times = []
    start_all = time.perf_counter()
    steps = 0
    for size in sizes:
        if seconds and time.perf_counter() - start_all > seconds:
            break
        _sync(torch, device)
        start = time.perf_counter()
        train_step(torch, model, optimizer, MS_BATCH if not seconds else 8, size, device)
        _sync(torch, device)
        times.append(time.perf_counter() - start)
        steps += 1
    facts: dict[str, Any] = {"model": "resnet18", "steps": steps, "batch": MS_BATCH}
    if seconds:
        facts["record_s"] = time.perf_counter() - start_all
    else:
        facts.update(sizes=sizes[:steps], step_s=times)
    return facts


def oom_cap(torch: Any, device: str, dump: Path | None) -> dict[str, Any]:
    total = torch.cuda.get_device_properties(0).total_memory if device != "cpu" else 0
    if device != "cpu":
        torch.cuda.set_per_process_memory_fraction(OOM_CAP_BYTES / total, 0)
    torch.manual_seed(SEED)
    model = _model(torch, 50, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    message, steps, stats = "", 0, {}
    try:
        for batch in OOM_BATCHES:
            train_step(torch, model, optimizer, batch, 224, device)
            steps += 1
    except torch.cuda.OutOfMemoryError as exc:
        message = str(exc)
        # the state at the error, before anything is freed: the snapshot is dumped here
        stats = dict(torch.cuda.memory_stats())
        if dump is not None:
            torch.cuda.memory._dump_snapshot(str(dump))
    return {
        "model": "resnet50",
        "cap_bytes": OOM_CAP_BYTES,
        "total_bytes": total,
        "batches": list(OOM_BATCHES),
        "steps_done": steps,
        "error": message,
        "allocated_at_error_bytes": stats.get("allocated_bytes.all.current", 0),
        "reserved_at_error_bytes": stats.get("reserved_bytes.all.current", 0),
    }


def run_one(name: str, out: Path, large_s: float, device: str) -> None:
    import torch

    cuda = device != "cpu"
    stacks = "all" if name in STACKS_ALL else "python"
    entries = 8_000_000 if name == "large" else 1_000_000
    if cuda:
        torch.cuda.memory._record_memory_history(max_entries=entries, stacks=stacks)
    raw = out / f"{name}.pickle"
    start = time.perf_counter()
    if name.startswith("cnn_"):
        facts = cnn(torch, device)
    elif name.startswith("ms_"):
        facts = multiscale(torch, device)
    elif name == "oom_cap":
        facts = oom_cap(torch, device, raw if cuda else None)
    else:
        facts = multiscale(torch, device, large_s)
    facts["run_s"] = time.perf_counter() - start
    facts.update(alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), stacks=stacks, max_entries=entries)
    if cuda:
        stats = torch.cuda.memory_stats()
        facts.update(
            max_memory_reserved_bytes=torch.cuda.max_memory_reserved(),
            max_memory_allocated_bytes=torch.cuda.max_memory_allocated(),
            memory_reserved_bytes=torch.cuda.memory_reserved(),
            segments_allocated=stats.get("segment.all.allocated", 0),
            num_alloc_retries=stats.get("num_alloc_retries", 0),
            num_ooms=stats.get("num_ooms", 0),
            torch=torch.__version__,
            device=torch.cuda.get_device_name(0),
        )
        start = time.perf_counter()
        if not raw.exists():
            torch.cuda.memory._dump_snapshot(str(raw))
        torch.cuda.memory._record_memory_history(enabled=None)
        facts["dump_s"] = time.perf_counter() - start
        facts["pickle_bytes"] = raw.stat().st_size
        _compress(raw, name == "large")
    (out / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")


def _compress(raw: Path, split: bool) -> None:
    packed = raw.with_name(raw.name + ".gz")
    pigz = shutil.which("pigz")
    if pigz:
        subprocess.run([pigz, "-6", "-f", str(raw)], check=True)
    else:
        level = 1 if split else 9  # level 1 for the large one: a gigabyte at 9 takes minutes
        with open(raw, "rb") as src, gzip.open(packed, "wb", compresslevel=level) as dst:
            shutil.copyfileobj(src, dst, 16 * MiB)
        raw.unlink()
    if split:
        with open(packed, "rb") as src:
            part = 0
            while chunk := src.read(PART_BYTES):
                suffix = chr(ord("a") + part // 26) + chr(ord("a") + part % 26)
                (packed.parent / f"{packed.name}.part-{suffix}").write_bytes(chunk)
                part += 1
        packed.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenario", choices=sorted(SETTINGS))
    parser.add_argument("--large-s", type=float, default=0.0, help="0: no large snapshot")
    parser.add_argument("--cpu-check", action="store_true", help="run the code on the CPU")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.cpu_check else "cuda"
    if args.scenario:
        run_one(args.scenario, args.out, args.large_s, device)
        return 0
    names = [n for n in SETTINGS if n != "large" or args.large_s > 0]
    running = {}
    if "large" in names:  # the longest, in the background; the others one at a time beside it
        running["large"] = _start("large", args)
    failed = 0
    for name in names:
        if name != "large":
            failed += _report(name, _start(name, args).wait(), args.out)
    for name, proc in running.items():
        failed += _report(name, proc.wait(), args.out)
    return 1 if failed else 0


def _start(name: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if SETTINGS[name]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[name]
    command = [sys.executable, __file__, "--out", str(args.out), "--scenario", name]
    command += ["--large-s", str(args.large_s)] + (["--cpu-check"] if args.cpu_check else [])
    return subprocess.Popen(command, env=env)


def _report(name: str, code: int, out: Path) -> int:
    facts = out / f"{name}.json"
    print(f"{name}: exit {code}, {facts.read_text() if facts.exists() else 'no facts'}", flush=True)
    return int(code != 0)


if __name__ == "__main__":
    sys.exit(main())
