"""Record before/after pairs for the newer findings, each differing by one change:

- ``llama``: a Llama-style decoder (built from a config, bf16, SDPA attention) running a
  prefill forward in eager mode vs under ``torch.compile`` (the elementwise, RMSNorm, RoPE and
  SiLU chains between the GEMMs fused).
- ``comm``: two ranks on one GPU (gloo on CUDA tensors) training an MLP stack, gradients
  all-reduced one parameter at a time after backward vs by DDP's buckets during backward.
- ``host_pre``: uint8 images resized and normalised on the main thread before a ResNet-50
  inference forward vs the same preprocessing on the GPU (the uint8 batch copied from pinned
  memory). Moving it into 4 DataLoader workers was measured too and was slower (79.9 vs 148.6
  ms/step on an H100 host with 16 cores: each worker runs single-threaded, the main thread
  used all 16 cores), so the GPU is the fix recorded here.
- ``gpt2_compile``, ``resnet_compile``: whole training steps of GPT-2 (SDPA) and ResNet-50
  (channels_last), bf16 autocast, eager vs the model under ``torch.compile``: what fusing the
  memory-bound work saves on a training step.
- ``memgrow``: a training loop that keeps every step's logits (and so their memory) in a list
  vs one that keeps only the detached loss; recorded with memory events and Python stacks.

On a CUDA machine:   python3 sample_traces/make_catalogue_pairs.py --out sample_traces/catalogue
On a CPU-only one:   python3 sample_traces/make_catalogue_pairs.py --smoke --out /tmp/cat
``--only llama,comm`` records some pairs.

Step times are measured outside the profiler with CUDA events (mean ms/step over 10 steps
after warm-up; ``sample_traces/cuda_timing.py``): the ground truth of what each change saves.
``memgrow`` also records ``torch.cuda.memory_allocated`` after each step: its growth per step.
The table is written as ``timings.json`` beside the traces. Nothing is downloaded.
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
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import N_STEPS, record, time_step

Step = Callable[[], object]


# ---- llama: eager vs torch.compile ------------------------------------------------------------
def llama(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=128 if smoke else 2048, intermediate_size=344 if smoke else 5632,
        num_hidden_layers=2 if smoke else 8, num_attention_heads=4 if smoke else 16,
        num_key_value_heads=4 if smoke else 16, vocab_size=32000, max_position_embeddings=4096,
        attn_implementation="sdpa",
    )
    dtype = torch.float32 if smoke else torch.bfloat16
    model = LlamaForCausalLM(cfg).to(dev, dtype).eval()
    ids = torch.randint(0, 32000, (2, 64) if smoke else (8, 1024), device=dev)
    fwd = torch.compile(model) if after else model

    @torch.no_grad()
    def step() -> object:
        return fwd(input_ids=ids, use_cache=False).logits

    for _ in range(2 if after else 0):  # compile before timing and profiling
        step()
    what = "Llama-style decoder (8 layers, 2048 wide) bf16 prefill 8x1024 under torch.compile" if after else "the same decoder in eager mode (SDPA attention)"
    return step, what


# ---- comm: per-parameter allreduce vs DDP buckets ---------------------------------------------
def _mlp(smoke: bool) -> nn.Module:
    width, depth = (64, 8) if smoke else (1024, 48)
    return nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.GELU())])


def _comm_rank(rank: int, world: int, init: str, out: str, smoke: bool, after: bool, q: Any) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    cuda = torch.cuda.is_available() and not smoke
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    model = _mlp(smoke).to(dev)
    if after:
        model = DDP(model, device_ids=[0] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64 if smoke else 4096, 64 if smoke else 1024, device=dev)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        if not after:
            for p in model.parameters():  # the planted problem: one collective per parameter
                dist.all_reduce(p.grad)
                p.grad.div_(world)
        opt.step()
        return loss

    ms = time_step(step, cuda)
    name = "comm_ddp" if after else "comm_perparam"
    path = record(step, Path(out) / f"{name}.json.gz", cuda)
    dist.barrier()
    q.put((rank, ms, str(path)))
    dist.destroy_process_group()


def comm_pair(out: Path, smoke: bool) -> list[dict[str, object]]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    rows = []
    for after in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            q = ctx.Queue()
            init = f"file://{tmp}/rendezvous"
            procs = [ctx.Process(target=_comm_rank, args=(r, 2, init, str(out), smoke, after, q)) for r in range(2)]
            for p in procs:
                p.start()
            got = sorted(q.get(timeout=900) for _ in procs)
            for p in procs:
                p.join()
        for rank, ms, path in got:
            what = "DDP(model) over gloo: gradients in buckets during backward" if after else "dist.all_reduce(p.grad) for each of 96 parameters after backward (gloo)"
            rows.append({"pair": "comm", "side": "after" if after else "before", "rank": rank, "ms": round(ms, 3), "what": what, "file": Path(path).name})
            print(f"comm {'after' if after else 'before'} rank {rank}: {ms:.3f} ms/step {Path(path).name}", flush=True)
    return rows


# ---- host_pre: preprocessing on the main thread vs in DataLoader workers ---------------------
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255


def preprocess(raw: torch.Tensor, size: int) -> torch.Tensor:
    x = F.interpolate(raw.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return (x - MEAN) / STD


def host_pre(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    import torchvision

    batch, raw_px, size = (2, 96, 64) if smoke else (64, 512, 224)
    g = torch.Generator().manual_seed(0)
    raws = [torch.randint(0, 256, (batch, 3, raw_px, raw_px), dtype=torch.uint8, generator=g) for _ in range(4)]
    model = torchvision.models.resnet50().to(dev).eval().to(memory_format=torch.channels_last)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    counter = iter(range(10**9))
    if after:
        # the fix: ship the uint8 images (4x smaller than float) from pinned memory and
        # resize/normalise on the GPU; the host only launches
        pinned = [r.pin_memory() if dev.type == "cuda" else r for r in raws]
        mean, std = MEAN.to(dev), STD.to(dev)

        def get() -> torch.Tensor:
            raw = pinned[next(counter) % len(pinned)].to(dev, non_blocking=True)
            x = F.interpolate(raw.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False)
            return (x - mean) / std
    else:
        def get() -> torch.Tensor:
            return preprocess(raws[next(counter) % len(raws)], size)

    @torch.no_grad()
    def step() -> object:
        x = get().to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        with torch.autocast(dev.type, dtype=dtype):
            return model(x)

    what = ("uint8 images copied from pinned memory, resized+normalised on the GPU, ResNet-50 bf16 inference" if after
            else "resize 512->224 + normalise of uint8 images on the main thread, then ResNet-50 bf16 inference")
    return step, what


# ---- memgrow: logits kept across steps vs the detached loss -----------------------------------
def memgrow(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str, list[int]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=64 if smoke else 512, n_head=4 if smoke else 8, n_positions=512, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    ids = torch.randint(0, 50257, (2, 32) if smoke else (8, 256), device=dev)
    kept: list[torch.Tensor] = []
    allocated: list[int] = []

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        kept.append(out.loss.detach() if after else out.logits)  # the planted leak: logits kept
        if dev.type == "cuda":
            allocated.append(torch.cuda.memory_allocated())
        return out.loss

    what = "kept.append(out.loss.detach()) each step" if after else "kept.append(out.logits) each step (the logits stay alive)"
    return step, what, allocated


# ---- gpt2_compile / resnet_compile: whole training steps, eager vs torch.compile -------------
def gpt2_compile(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    from sample_traces.make_model_pairs import gpt2, train_step

    torch.manual_seed(0)
    model, ids = gpt2(smoke, "sdpa")
    model, ids = model.to(dev), ids.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    fwd = torch.compile(model) if after else model
    step = train_step(fwd, opt, lambda: fwd(input_ids=ids, labels=ids))
    for _ in range(3 if after else 0):  # compile before timing and profiling
        step()
    what = "the same training step with the model under torch.compile" if after else 'GPT-2 (6 layers, d=768, seq 1024, batch 8) training, bf16 autocast, SDPA, fused AdamW, eager'
    return step, what


def resnet_compile(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    import torchvision

    from sample_traces.make_model_pairs import train_step

    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    x = torch.randn(4 if smoke else 64, 3, 64 if smoke else 224, 64 if smoke else 224, device=dev).contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    fwd = torch.compile(model) if after else model
    step = train_step(fwd, opt, lambda: fwd(x))
    for _ in range(3 if after else 0):
        step()
    what = "the same training step with the model under torch.compile" if after else "ResNet-50 training, batch 64, channels_last, bf16 autocast, SGD foreach, eager"
    return step, what


PAIRS = ("llama", "comm", "host_pre", "memgrow", "gpt2_compile", "resnet_compile")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "catalogue")
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(PAIRS)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    dev = torch.device("cuda" if cuda else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}", flush=True)
    rows: list[dict[str, object]] = []
    failed = []
    files = {"llama": ("llama_eager", "llama_compiled"), "host_pre": ("host_pre_main", "host_pre_gpu"),
             "memgrow": ("memgrow_keep", "memgrow_detach"), "gpt2_compile": ("gpt2_eager", "gpt2_compiled"),
             "resnet_compile": ("resnet_eager", "resnet_compiled")}
    for name in names:
        try:
            if name == "comm":
                rows.extend(comm_pair(args.out, args.smoke))
                continue
            for after in (False, True):
                side = "after" if after else "before"
                row: dict[str, object] = {"pair": name, "side": side}
                if name == "memgrow":
                    step, what, allocated = memgrow(dev, args.smoke, after)
                    ms = time_step(step, cuda)
                    path = record(step, args.out / f"{files[name][after]}.json.gz", cuda, profile_memory=True, with_stack=True)
                    tail = allocated[-N_STEPS:]
                    if len(tail) > 1:
                        row["growth_bytes_per_step"] = round((tail[-1] - tail[0]) / (len(tail) - 1))
                else:
                    make = {"llama": llama, "host_pre": host_pre, "gpt2_compile": gpt2_compile, "resnet_compile": resnet_compile}[name]
                    step, what = make(dev, args.smoke, after)
                    ms = time_step(step, cuda)
                    path = record(step, args.out / f"{files[name][after]}.json.gz", cuda)
                row.update(ms=round(ms, 3), what=what, file=path.name, bytes=path.stat().st_size)
                rows.append(row)
                print(f"{name} {side}: {ms:.3f} ms/step [{what}] {path.name} {path.stat().st_size:,} bytes "
                      f"{row.get('growth_bytes_per_step', '')}", flush=True)
                del step
                if cuda:
                    torch.cuda.empty_cache()
        except Exception:
            traceback.print_exc()
            failed.append(name)
    (args.out / "timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(r)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
