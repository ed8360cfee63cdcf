"""Record a 4-rank DistributedDataParallel job whose ranks share one GPU (gloo on CUDA tensors).

On a machine with one CUDA GPU:
    torchrun --standalone --nproc_per_node=4 sample_traces/make_gloo_job.py --out sample_traces
Without a GPU (checks the script only, on the CPU; not a published sample):
    torchrun --standalone --nproc_per_node=4 sample_traces/make_gloo_job.py --out /tmp/job --smoke

Two recordings of the same job, one after the other in the same processes:
``job_balanced.rank<N>.json.gz`` (every rank's input step takes the same time) and
``job_straggler.rank<N>.json.gz`` (rank ``--slow-rank``, 2 by default, sleeps ``--delay-ms``
more inside its ``data_loading`` annotation each step; the other ranks wait for it in DDP's
gradient all-reduce). ``profile`` adds the rank to each file name.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traceinsight.capture import Schedule, profile

SCHEDULE = Schedule(wait=2, warmup=1, active=8)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny sizes")
    parser.add_argument("--slow-rank", type=int, default=2)
    parser.add_argument("--delay-ms", type=float, default=30.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    cuda = torch.cuda.is_available() and not args.smoke
    # Every rank uses the same (only) GPU: gloo all-reduces CUDA tensors through host memory.
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    width, batch = (1024, 256) if cuda else (64, 8)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(4)])
    ddp = DistributedDataParallel(model.to(device), bucket_cap_mb=25)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator(device=device).manual_seed(rank)

    def load_batch(slow: bool) -> torch.Tensor:
        # A stand-in for a DataLoader: host work to "decode" a batch, then the copy to the GPU.
        with torch.profiler.record_function("data_loading"):
            base = torch.randn(batch, width, generator=gen, device=device)
            time.sleep(0.002)
            if slow:
                time.sleep(args.delay_ms / 1e3)
            return base

    def step(slow: bool) -> None:
        x = load_batch(slow)
        loss = ddp(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    args.out.mkdir(parents=True, exist_ok=True)
    n_steps = SCHEDULE.wait + SCHEDULE.warmup + SCHEDULE.active
    for name in ("job_balanced", "job_straggler"):
        slow = name == "job_straggler" and rank == args.slow_rank
        dist.barrier()
        times_ms: list[float] = []
        with profile(args.out / f"{name}.json.gz", schedule=SCHEDULE) as prof:
            for _ in range(n_steps):
                t0 = time.perf_counter()
                step(slow)
                if cuda:
                    torch.cuda.synchronize()
                times_ms.append((time.perf_counter() - t0) * 1e3)
                prof.step()
        if cuda:
            torch.cuda.synchronize()
        active = times_ms[-SCHEDULE.active :]
        sizes = ", ".join(f"{p.name} {p.stat().st_size:,} bytes" for p in prof.paths)
        print(
            f"{name} rank {rank}/{world}{' (slow)' if slow else ''}: step ms over the active "
            f"steps: mean {statistics.fmean(active):.1f}, min {min(active):.1f}, "
            f"max {max(active):.1f}; {sizes}",
            flush=True,
        )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
