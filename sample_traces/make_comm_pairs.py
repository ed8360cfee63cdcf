"""Record before/after trace pairs of communication fixes on two GPUs (one rank each, NCCL
unless said), each pair differing by one change that a communication finding should name:

- ``a2a``: an all-to-all of embedding-sized rows run blocking before the dense part of the step,
  vs the same all-to-all started asynchronously and waited for after the dense part
  (``exposed_all_to_all``);
- ``bucket``: DDP with one bucket for every gradient (``bucket_cap_mb`` larger than the model:
  the all-reduce starts when backward has finished) vs DDP's default 25 MB buckets, reduced
  during backward (``exposed_communication``);
- ``gloo``: DDP over gloo with CUDA tensors vs over NCCL (``cpu_collectives``).

On a machine with 2 CUDA GPUs:  python3 sample_traces/make_comm_pairs.py --out sample_traces/comm
On a CPU-only one (gloo only):   python3 sample_traces/make_comm_pairs.py --smoke --out /tmp/comm

Each side's step is timed outside the profiler with CUDA events on every rank (mean ms/step over
10 steps after 3 warm-up steps) before it is profiled; the table goes to ``comm_timings.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import record, time_step

Step = Callable[[], object]
WORLD = 2


def _mlp(smoke: bool) -> nn.Module:
    width, depth = (64, 4) if smoke else (2048, 24)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.GELU())])


def a2a(rank: int, dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    import torch.distributed as dist

    torch.manual_seed(rank)
    rows, dim = (64, 16) if smoke else (1 << 20, 128)  # 1 Mi rows x 128 fp32 = 512 MiB per rank
    emb = torch.randn(rows, dim, device=dev)
    out = torch.empty_like(emb)
    dense = _mlp(smoke).to(dev)
    x = torch.randn(64 if smoke else 8192, 64 if smoke else 2048, device=dev)

    def step() -> object:
        with torch.no_grad():
            if after:
                work = dist.all_to_all_single(out, emb, async_op=True)
                y = dense(x)
                assert work is not None
                work.wait()
            else:
                dist.all_to_all_single(out, emb)
                y = dense(x)
            return y.sum() + out[:1].sum()

    what = (
        "all_to_all_single started with async_op=True, the dense MLP run meanwhile, waited for after it"
        if after
        else "all_to_all_single (512 MiB per rank) run blocking, then the dense MLP"
    )
    return step, what


def _ddp_step(rank: int, dev: torch.device, smoke: bool, bucket_cap_mb: float | None) -> Step:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = _mlp(smoke).to(dev)
    kw: dict[str, Any] = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    ddp = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None, **kw)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(64 if smoke else 4096, 64 if smoke else 2048, device=dev)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        loss = ddp(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def bucket(rank: int, dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    if after:
        return _ddp_step(rank, dev, smoke, None), "DDP with its default 25 MB buckets (reduced during backward)"
    return _ddp_step(rank, dev, smoke, 4096.0), "DDP(bucket_cap_mb=4096): one bucket, reduced after backward ends"


def gloo(rank: int, dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    # the backend is chosen when the group is made (see BACKENDS); the step is the same DDP
    return _ddp_step(rank, dev, smoke, None), ("DDP over NCCL" if after else "DDP over gloo (CUDA tensors staged through the host)")


PAIRS: dict[str, Callable[[int, torch.device, bool, bool], tuple[Step, str]]] = {"a2a": a2a, "bucket": bucket, "gloo": gloo}
# backend per (pair, side); NCCL unless said
BACKENDS = {("gloo", "before"): "gloo"}


def _rank(rank: int, name: str, side: str, init: str, out: str, smoke: bool, q: Any) -> None:
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and not smoke
    backend = "gloo" if not cuda else BACKENDS.get((name, side), "nccl")
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=WORLD)
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        step, what = PAIRS[name](rank, dev, smoke, side == "after")
        ms = time_step(step, cuda)
        dist.barrier()
        path = record(step, Path(out) / f"comm_{name}_{side}.json.gz", cuda)  # the profiler adds .rankN
        dist.barrier()
        q.put((rank, ms, str(path), what, backend))
    except Exception:
        traceback.print_exc()
        q.put((rank, float("nan"), "", "failed", backend))
    finally:
        dist.destroy_process_group()


def run_pair(name: str, out: Path, smoke: bool) -> list[dict[str, object]]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    rows: list[dict[str, object]] = []
    for side in ("before", "after"):
        with tempfile.TemporaryDirectory() as tmp:
            q = ctx.Queue()
            init = f"file://{tmp}/rendezvous"
            procs = [ctx.Process(target=_rank, args=(r, name, side, init, str(out), smoke, q)) for r in range(WORLD)]
            for p in procs:
                p.start()
            got = sorted(q.get(timeout=600) for _ in procs)
            for p in procs:
                p.join()
        for rank, ms, path, what, backend in got:
            rows.append({"pair": name, "side": side, "rank": rank, "ms": round(ms, 3), "backend": backend, "what": what,
                         "file": Path(path).name})
            print(f"{name} {side} rank {rank} ({backend}): {ms:.3f} ms/step [{what}] {Path(path).name}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "comm")
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    if not args.smoke and torch.cuda.device_count() < WORLD:
        ap.error(f"needs {WORLD} CUDA devices (or --smoke)")
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(PAIRS)
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, {torch.cuda.device_count()} x {torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}", flush=True)
    rows: list[dict[str, object]] = []
    for name in names:
        rows.extend(run_pair(name, args.out, args.smoke))
    (args.out / "comm_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
