"""Measure what torch.profiler itself costs the host, per recorded event: the ground truth
behind the window assessment's profiler-overhead estimate.

Each workload is made host-bound (small batches), so that its step time is the host's time.
Its step is timed without the profiler, then inside ``torch.profiler.profile`` with each
option set (no shapes; ``record_shapes``; + ``with_stack``; + ``profile_memory``), both by
wall clock around a synchronised run of steps. The trace of each profiled run is exported
and its host events counted per step, so that

    cost per event = (profiled step − plain step) / host events per step.

On a CUDA machine:  python3 sample_traces/measure_profiler_cost.py --out /tmp/cost
On a CPU-only one:  python3 sample_traces/measure_profiler_cost.py --smoke --out /tmp/cost
Writes ``profiler_cost.json`` (one row per workload and option set) and, with ``--keep``,
the profiled traces.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

Step = Callable[[], object]
# Host event categories a Kineto trace writes, and the ones counted as "host events".
HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function")
OPTIONS: dict[str, dict[str, bool]] = {
    "no_shapes": {"record_shapes": False},
    "shapes": {"record_shapes": True},
    "shapes_stack": {"record_shapes": True, "with_stack": True},
    "shapes_memory": {"record_shapes": True, "profile_memory": True},
}


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _ms_per_step(step: Step, cuda: bool, iters: int) -> float:
    _sync(cuda)
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    _sync(cuda)
    return (time.perf_counter() - t0) * 1e3 / iters


def _train(model: nn.Module, batch: Callable[[], torch.Tensor], cuda: bool) -> Step:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def step() -> object:
        opt.zero_grad()
        with torch.autocast("cuda" if cuda else "cpu", dtype=torch.bfloat16):
            out = batch()
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def resnet_train(dev: torch.device, smoke: bool) -> Step:
    import torchvision

    model = torchvision.models.resnet50(num_classes=1000).to(dev)
    x = torch.randn(2, 3, 64 if smoke else 96, 64 if smoke else 96, device=dev)
    return _train(model, lambda: model(x), dev.type == "cuda")


def _gpt2(dev: torch.device, smoke: bool) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2 if smoke else 12, n_embd=64 if smoke else 256, n_head=4, n_positions=256, vocab_size=8192)
    return GPT2LMHeadModel(cfg).to(dev)


def gpt2_train(dev: torch.device, smoke: bool) -> Step:
    model = _gpt2(dev, smoke)
    ids = torch.randint(0, 8192, (1, 32), device=dev)
    return _train(model, lambda: model(input_ids=ids).logits, dev.type == "cuda")


def gpt2_forward(dev: torch.device, smoke: bool) -> Step:
    model = _gpt2(dev, smoke).eval()
    ids = torch.randint(0, 8192, (1, 16), device=dev)

    def step() -> object:
        with torch.no_grad():
            return model(input_ids=ids).logits

    return step


def tiny_ops(dev: torch.device, smoke: bool) -> Step:
    x = torch.ones(256, device=dev)

    def step() -> object:
        for _ in range(50 if smoke else 500):
            x.mul_(1.0001)
        return x

    return step


WORKLOADS: dict[str, Callable[[torch.device, bool], Step]] = {
    "resnet50_train": resnet_train,
    "gpt2_train": gpt2_train,
    "gpt2_forward": gpt2_forward,
    "tiny_ops": tiny_ops,
}


def _count(trace: Path, steps: int) -> dict[str, float]:
    with open(trace, "rb") as f:
        events = json.load(f)["traceEvents"]
    cats = Counter(e.get("cat") for e in events if e.get("ph") == "X")
    counts = {c: cats.get(c, 0) / steps for c in HOST_CATS}
    counts["memory"] = sum(1 for e in events if e.get("ph") == "i" and e.get("name") == "[memory]") / steps
    counts["host_events"] = sum(counts[c] for c in HOST_CATS)
    return counts


def _profiled(step: Step, cuda: bool, options: dict[str, bool], warmup: int, iters: int, trace: Path) -> float:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, **options) as prof:
        for _ in range(warmup):
            step()
        ms = _ms_per_step(step, cuda, iters)
    prof.export_chrome_trace(str(trace))
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=2, help="plain/profiled rounds, interleaved")
    ap.add_argument("--keep", action="store_true", help="keep the profiled traces (gzipped)")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    dev = torch.device("cuda" if cuda else "cpu")
    warmup, iters = (2, 3) if args.smoke else (3, 10)
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"torch {torch.__version__}, device {device}", flush=True)
    names = [n for n in args.only.split(",") if n] or list(WORKLOADS)
    rows = []
    for name in names:
        torch.manual_seed(0)
        step = WORKLOADS[name](dev, args.smoke)
        for _ in range(5):
            step()
        for r in range(args.rounds):
            plain = _ms_per_step(step, cuda, iters)
            for opt, options in OPTIONS.items():
                trace = args.out / f"{name}_{opt}.json"
                ms = _profiled(step, cuda, options, warmup, iters, trace)
                counts = _count(trace, warmup + iters)
                extra_us = (ms - plain) * 1e3
                row = {
                    "workload": name, "round": r, "options": opt, "device": device, "torch": torch.__version__,
                    "plain_ms": round(plain, 4), "profiled_ms": round(ms, 4),
                    "host_events_per_step": round(counts["host_events"], 1),
                    "per_category": {k: round(v, 1) for k, v in counts.items()},
                    "us_per_event": round(extra_us / counts["host_events"], 3) if counts["host_events"] else None,
                }
                rows.append(row)
                print(f"{name} r{r} {opt}: plain {plain:.3f} ms, profiled {ms:.3f} ms, "
                      f"{counts['host_events']:.0f} host events/step -> {row['us_per_event']} us/event", flush=True)
                if args.keep and r == 0:
                    with open(trace, "rb") as src, gzip.open(f"{trace}.gz", "wb") as dst:
                        shutil.copyfileobj(src, dst)
                trace.unlink()
        del step
        if cuda:
            torch.cuda.empty_cache()
    (args.out / "profiler_cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
