"""Record the two-GPU DistributedDataParallel sample (one trace per rank, NCCL all-reduces).

On a machine with two CUDA GPUs:
    torchrun --standalone --nproc_per_node=2 sample_traces/make_ddp_sample.py --out sample_traces
Without GPUs (checks the script only, gloo on the CPU; not a published sample):
    torchrun --standalone --nproc_per_node=2 sample_traces/make_ddp_sample.py --out /tmp/ddp --smoke
Each rank writes ``ddp_train.rank<N>.json.gz`` (``profile`` adds the rank to the name).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traceinsight.capture import Schedule, profile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--smoke", action="store_true", help="CPU and gloo, tiny sizes")
    args = parser.parse_args()
    dist.init_process_group("gloo" if args.smoke else "nccl")
    rank = dist.get_rank()
    device = torch.device("cpu") if args.smoke else torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    width = 64 if args.smoke else 4096
    batch = 8 if args.smoke else 2048
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(6)]).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                  bucket_cap_mb=25)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=device.type == "cuda")
    x = torch.randn(batch, width, device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = ddp(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    args.out.mkdir(parents=True, exist_ok=True)
    schedule = Schedule(wait=2, warmup=1, active=6)
    with profile(args.out / "ddp_train.json.gz", schedule=schedule) as prof:
        for _ in range(schedule.wait + schedule.warmup + schedule.active):
            step()
            prof.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    for path in prof.paths:
        print(f"rank {rank}: wrote {path} ({path.stat().st_size:,} bytes)", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
