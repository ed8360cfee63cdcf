"""Step-time overhead of the NVML sampler on a real training loop, A/B interleaved.

Blocks of training steps alternate between "sampler off" and "sampler on" (order randomised
within each pair, so drift in clocks or temperature hits both arms alike). Each block's time
is measured with the GPU synchronised at its ends; the overhead is the median over pairs of
(on / off - 1), with a bootstrap 95 % interval.

    python3 benchmarks/sampler_overhead.py                 # CUDA, default 0.1 s interval
    python3 benchmarks/sampler_overhead.py --smoke         # CPU, tiny, checks the script only
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traceinsight.capture.nvml import NvmlSampler


def make_tiny_step(device: torch.device, smoke: bool):  # type: ignore[no-untyped-def]
    # The tiny_kernels sample: host-bound, so any time the sampler takes from the Python
    # thread shows up in the step time instead of hiding behind queued GPU work.
    a = torch.randn(64, 64, device=device)
    b = torch.randn(64, 64, device=device)
    iters = 10 if smoke else 300

    def step() -> None:
        x = a
        for _ in range(iters):
            x = torch.matmul(x, b)
            x = x * 0.5
            x = x + a

    return step


def make_step(device: torch.device, smoke: bool):  # type: ignore[no-untyped-def]
    # The train_eager sample's model: two transformer encoder layers, AdamW, eager.
    d, vocab, batch, seq = (32, 64, 2, 8) if smoke else (512, 8192, 32, 256)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(vocab, d),
        nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, dropout=0.0),
        nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True, dropout=0.0),
        nn.Linear(d, vocab),
    ).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (batch, seq), device=device)
    targets = torch.randint(0, vocab, (batch, seq), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(tokens).view(-1, vocab), targets.view(-1))
        loss.backward()
        opt.step()

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def block_s(step, steps: int, device: torch.device) -> float:  # type: ignore[no-untyped-def]
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - t0) / steps


def bootstrap_ci(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pairs", type=int, default=30, help="A/B block pairs")
    ap.add_argument("--steps", type=int, default=40, help="training steps per block")
    ap.add_argument("--interval", type=float, default=0.1, help="sampler interval_s")
    ap.add_argument(
        "--workload",
        choices=["train", "tiny"],
        default="train",
        help="train: the train_eager model (GPU-bound); tiny: 900 tiny ops a step (host-bound)",
    )
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run to check the script")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke")
    device = torch.device("cuda" if cuda else "cpu")
    step = (make_tiny_step if args.workload == "tiny" else make_step)(device, args.smoke)
    for _ in range(10):  # warm up kernels, allocator and clocks
        step()
    devices = [torch.cuda.current_device()] if cuda else [0]
    rng = random.Random(1)
    off: list[float] = []
    on: list[float] = []
    ratios: list[float] = []
    n_ticks = 0
    for _ in range(args.pairs):
        pair: dict[str, float] = {}
        for arm in rng.sample(["off", "on"], 2):
            if arm == "on":
                sampler = NvmlSampler(devices, interval_s=args.interval)
                sampler.start()  # NVML init happens here, outside the timed block
                pair[arm] = block_s(step, args.steps, device)
                sampler.stop()
                n_ticks += sampler.n_ticks
                status = sampler.status
            else:
                pair[arm] = block_s(step, args.steps, device)
        off.append(pair["off"])
        on.append(pair["on"])
        ratios.append(pair["on"] / pair["off"] - 1.0)
    lo, hi = bootstrap_ci(ratios)
    med = statistics.median(ratios)
    print(f"device: {torch.cuda.get_device_name() if cuda else 'cpu'}, torch {torch.__version__}")
    print(f"sampler status: {status}, interval_s={args.interval}, ticks in 'on' blocks: {n_ticks}")
    print(f"workload {args.workload}: {args.pairs} pairs x {args.steps} steps per block")
    print(
        f"median step time: off {statistics.median(off) * 1e3:.3f} ms, "
        f"on {statistics.median(on) * 1e3:.3f} ms "
        f"(spread of blocks: off {min(off) * 1e3:.3f}-{max(off) * 1e3:.3f}, "
        f"on {min(on) * 1e3:.3f}-{max(on) * 1e3:.3f} ms)"
    )
    print(
        f"SUMMARY sampler overhead: {med * 100:+.2f} % of step time "
        f"(95 % bootstrap CI {lo * 100:+.2f} % .. {hi * 100:+.2f} %; target <= 1 %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
