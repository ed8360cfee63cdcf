"""Record allocator snapshots under different ``PYTORCH_CUDA_ALLOC_CONF`` settings, for the
allocator replay of ``traceinsight memory`` to be checked against.

    python3 sample_traces/make_memory_snapshots_2.py --out /tmp/memory2 [--large-s 60]

Each scenario runs in a process of its own (the allocator reads ``PYTORCH_CUDA_ALLOC_CONF``
once, when CUDA starts) and writes ``NAME.pickle.gz`` with ``NAME.json`` beside it: what the
process itself measured (``torch.cuda.max_memory_reserved``, ``memory_stats()``), which the
tests compare the replay's predictions with.

- ``lm_default``, ``lm_expandable``, ``lm_maxsplit``: the same training run of a GPT-2 shaped
  language model (``transformers.GPT2Config``, 4 layers) on batches of random lengths, under
  the default settings, ``expandable_segments:True`` and ``max_split_size_mb:64``;
- ``oom_fraction``: the same model with a batch too big for a 6 GiB per-process cap
  (``torch.cuda.set_per_process_memory_fraction``);
- ``doubling``: a loop whose input doubles each iteration, the previous one freed (growth, not
  a leak);
- ``large`` (with ``--large-s``): a long run with ``stacks="all"`` and a deep history, about
  1 GB, written gzip-compressed and split into 15 MiB parts (``large.pickle.gz.part-aa`` ...).

Needs a CUDA GPU and ``transformers``. In the snapshots kept under
``sample_traces/memory/alloc/`` the script's own path in the stacks was rewritten to
``/root/make_memory_snapshots_2.py`` (the directory it ran from says nothing); nothing else
was changed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MiB = 1 << 20
GiB = 1 << 30
SEED = 1234
LM_STEPS = 8
LM_BATCH = 8
LM_MIN_LEN, LM_MAX_LEN = 96, 1024
OOM_CAP_BYTES = 6 * GiB
OOM_BATCH = 48
DOUBLING_STEPS = 8
DOUBLING_BASE_BYTES = 2 * MiB
PART_BYTES = 15 * MiB

SETTINGS = {
    "lm_default": "",
    "lm_expandable": "expandable_segments:True",
    "lm_maxsplit": "max_split_size_mb:64",
    "oom_fraction": "",
    "doubling": "",
    "large": "",
}


def _model(torch: Any, layers: int, width: int) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=layers, n_embd=width, n_head=max(width // 64, 1), vocab_size=32000, n_positions=1024
    )
    return GPT2LMHeadModel(config).to("cuda")


def _lengths(n: int) -> list[int]:
    import random

    rng = random.Random(SEED)
    return [rng.randrange(LM_MIN_LEN, LM_MAX_LEN + 1) for _ in range(n)]


def train_step(torch: Any, model: Any, optimizer: Any, batch: int, length: int) -> None:
    ids = torch.randint(0, 32000, (batch, length), device="cuda")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def lm(torch: Any) -> dict[str, Any]:
    torch.manual_seed(SEED)
    model = _model(torch, 4, 768)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = _lengths(LM_STEPS)
    times = []
    for length in lengths:
        torch.cuda.synchronize()
        start = time.perf_counter()
        train_step(torch, model, optimizer, LM_BATCH, length)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"steps": LM_STEPS, "batch": LM_BATCH, "lengths": lengths, "step_s": times}


def oom_fraction(torch: Any) -> dict[str, Any]:
    total = torch.cuda.get_device_properties(0).total_memory
    fraction = OOM_CAP_BYTES / total
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    torch.manual_seed(SEED)
    model = _model(torch, 4, 768)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    message = ""
    steps = 0
    try:
        for length in (256, 512, 1024):
            train_step(torch, model, optimizer, OOM_BATCH, length)
            steps += 1
    except torch.cuda.OutOfMemoryError as exc:
        message = str(exc).splitlines()[0]
    free, _total = torch.cuda.mem_get_info()
    return {
        "fraction": fraction,
        "cap_bytes": OOM_CAP_BYTES,
        "total_bytes": total,
        "batch": OOM_BATCH,
        "steps_done": steps,
        "error": message,
        "device_free_after_bytes": free,
    }


def grow_step(torch: Any, x: Any) -> Any:
    y = x * 2  # a temporary the size of the input
    nxt = torch.empty(x.numel() * 2, device="cuda")  # the next, twice as big
    nxt[: x.numel()] = y
    return nxt


def doubling(torch: Any) -> dict[str, Any]:
    x = torch.ones(DOUBLING_BASE_BYTES // 4, device="cuda")
    sizes = []
    for _ in range(DOUBLING_STEPS):
        marker = torch.zeros(256, device="cuda")  # one small block per iteration, freed
        x = grow_step(torch, x)  # the previous input is freed here
        sizes.append(x.numel() * 4)
        del marker
    torch.cuda.synchronize()
    return {"steps": DOUBLING_STEPS, "sizes_bytes": sizes, "grow_function": "grow_step"}


def large(torch: Any, seconds: float) -> dict[str, Any]:
    torch.manual_seed(SEED)
    model = _model(torch, 2, 256)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = _lengths(100_000)
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < seconds:
        train_step(torch, model, optimizer, 2, lengths[steps] // 4)
        steps += 1
    torch.cuda.synchronize()
    return {"steps": steps, "record_s": time.perf_counter() - start}


def run_one(name: str, out: Path, large_s: float) -> None:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("make_memory_snapshots_2.py needs a CUDA GPU")
    stacks = "all" if name == "large" else "python"
    entries = 2_500_000 if name == "large" else 400_000
    torch.cuda.memory._record_memory_history(max_entries=entries, stacks=stacks)
    if name.startswith("lm_"):
        facts = lm(torch)
    elif name == "oom_fraction":
        facts = oom_fraction(torch)
    elif name == "doubling":
        facts = doubling(torch)
    else:
        facts = large(torch, large_s)
    stats = torch.cuda.memory_stats()
    facts.update(
        alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        max_memory_reserved_bytes=torch.cuda.max_memory_reserved(),
        max_memory_allocated_bytes=torch.cuda.max_memory_allocated(),
        memory_reserved_bytes=torch.cuda.memory_reserved(),
        segments_allocated=stats.get("segment.all.allocated", 0),
        num_alloc_retries=stats.get("num_alloc_retries", 0),
        num_ooms=stats.get("num_ooms", 0),
        torch=torch.__version__,
        device=torch.cuda.get_device_name(0),
        max_entries=entries,
        stacks=stacks,
    )
    start = time.perf_counter()
    raw = out / f"{name}.pickle"
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
        # Level 1 for the large one: a gigabyte at level 6 takes a minute on one core.
        level = 1 if split else 6
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
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.scenario:
        run_one(args.scenario, args.out, args.large_s)
        return 0
    names = [n for n in SETTINGS if n != "large" or args.large_s > 0]
    running = {}
    # The large one first, in the background: it is the longest; the others one at a time
    # beside it (each measures only its own process's allocator).
    if "large" in names:
        running["large"] = _start("large", args)
    failed = 0
    for name in names:
        if name == "large":
            continue
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
    command += ["--large-s", str(args.large_s)]
    return subprocess.Popen(command, env=env)


def _report(name: str, code: int, out: Path) -> int:
    facts = out / f"{name}.json"
    print(f"{name}: exit {code}, {facts.read_text() if facts.exists() else 'no facts'}", flush=True)
    return int(code != 0)


if __name__ == "__main__":
    sys.exit(main())
