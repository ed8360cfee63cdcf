"""What torch.compile and channels_last save on a ResNet-50 trained in bf16, without the profiler.

The ``bf16`` side of the ``precision`` pair (``make_cause_pairs_b.py``: torchvision ResNet-50,
batch 96 at 224 px, SGD with momentum, ``torch.autocast(bfloat16)``), in variants timed with
CUDA events in interleaved rounds (``--rounds`` rounds of ``--iters`` steps each, 3 warm-up
steps per round): ``eager`` (as recorded), ``channels_last`` (model and input in channels-last
memory format) and ``compiled`` (``torch.compile(model)``, Inductor's defaults; compiled before
the rounds). The recorded trace's findings price these two fixes (``channels_last``,
``unfused_elementwise``); this is the truth they are checked against.

    python3 sample_traces/probe_compile_cnn.py --out probe_compile_cnn.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step


def variant(dev: torch.device, name: str, smoke: bool) -> Callable[[], object]:
    import torchvision

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).to(dev)
    x = torch.randn(4 if smoke else 96, 3, 64 if smoke else 224, 64 if smoke else 224, device=dev)
    y = torch.randint(0, 1000, (x.shape[0],), device=dev)
    if name == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    fn = torch.compile(model) if name == "compiled" and not smoke else model

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(fn(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.smoke
    dev = torch.device("cuda" if cuda else "cpu")
    names = ("eager", "channels_last", "compiled")
    steps = {n: variant(dev, n, args.smoke) for n in names}
    t0 = time.perf_counter()
    for _ in range(3):  # compiles the forward and backward graphs before any round
        steps["compiled"]()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if cuda else 'cpu'}; compiled in {time.perf_counter() - t0:.1f} s", flush=True)
    ms: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for n in names:
            ms[n].append(time_step(steps[n], cuda, warmup=3, iters=args.iters))
        print(f"round {r}: " + ", ".join(f"{n} {ms[n][-1]:.3f}" for n in names) + " ms/step", flush=True)
    row: dict[str, object] = {"device": torch.cuda.get_device_name() if cuda else "cpu", "rounds": args.rounds, "iters": args.iters}
    base = statistics.median(ms["eager"])
    for n in names:
        med = statistics.median(ms[n])
        row[n] = {"median_ms": round(med, 3), "rounds_ms": [round(v, 3) for v in ms[n]], "saving_pct": round(100 * (base - med) / base, 1)}
    print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
