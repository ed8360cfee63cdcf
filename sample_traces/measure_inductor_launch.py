"""Host time per kernel of Inductor's generated code, measured without the profiler.

A model compiled with Inductor (no CUDA graphs) runs its kernels from a Python wrapper: each
Triton kernel goes through its launcher, each library call (cuBLAS, cuDNN, attention) through
``extern_kernels``. At small batch the step is host-bound, so the step's time over its kernels
is the host's cost per kernel. This script measures it on several models built from configs
(nothing downloaded), inference at batch 1, each eager and compiled:

- the step's time: CUDA events around ``--iters`` steps after warm-up (compilation included in
  the warm-up), no profiler running;
- kernels per step and the GPU's busy time per step: one step under ``torch.profiler`` (the
  count and the kernels' durations do not depend on the profiler's host cost).

A row is host-bound when the GPU is busy under a third of the step; its ``host_us_per_kernel``
is then the step over its kernels. Prints the table and writes it as JSON with ``--out``.

    python3 sample_traces/measure_inductor_launch.py --out inductor_launch.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step

Step = Callable[[], object]


def _bert(dev: torch.device) -> tuple[nn.Module, Callable[[nn.Module], object]]:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=6, attn_implementation="sdpa")
    model = BertModel(cfg).to(dev).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128), device=dev)
    return model, lambda m: m(input_ids=ids).last_hidden_state


def _gpt2(dev: torch.device) -> tuple[nn.Module, Callable[[nn.Module], object]]:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=6, attn_implementation="sdpa")
    model = GPT2Model(cfg).to(dev).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 64), device=dev)
    return model, lambda m: m(input_ids=ids).last_hidden_state


def _resnet18(dev: torch.device) -> tuple[nn.Module, Callable[[nn.Module], object]]:
    import torchvision

    model = torchvision.models.resnet18(num_classes=1000).to(dev).eval()
    x = torch.randn(1, 3, 224, 224, device=dev)
    return model, lambda m: m(x)


def _vit(dev: torch.device) -> tuple[nn.Module, Callable[[nn.Module], object]]:
    import timm

    model = timm.create_model("vit_small_patch16_224", pretrained=False).to(dev).eval()
    x = torch.randn(1, 3, 224, 224, device=dev)
    return model, lambda m: m(x)


def _mlp(dev: torch.device) -> tuple[nn.Module, Callable[[nn.Module], object]]:
    layers: list[nn.Module] = []
    for _ in range(16):
        layers += [nn.Linear(512, 512), nn.LayerNorm(512), nn.GELU()]
    model = nn.Sequential(*layers).to(dev).eval()
    x = torch.randn(8, 512, device=dev)
    return model, lambda m: m(x)


MODELS: dict[str, Callable[[torch.device], tuple[nn.Module, Callable[[nn.Module], object]]]] = {
    "bert6_b1": _bert,
    "gpt2_6_b1": _gpt2,
    "resnet18_b1": _resnet18,
    "vit_small_b1": _vit,
    "mlp16": _mlp,
}


def _kernels(step: Step) -> tuple[int, float]:
    """Kernels (and copies/sets) launched by one step, and their total time in ms."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(events), sum(e.time_range.elapsed_us() for e in events) / 1e3


def measure(name: str, dev: torch.device, iters: int) -> list[dict[str, object]]:
    model, call = MODELS[name](dev)
    rows = []
    for mode in ("eager", "inductor"):
        fn = model if mode == "eager" else torch.compile(model)

        @torch.no_grad()
        def step(fn: nn.Module = fn) -> object:
            return call(fn)

        for _ in range(3):  # compile, autotune-free defaults
            step()
        ms = time_step(step, True, warmup=3, iters=iters)
        kernels, busy_ms = _kernels(step)
        host_bound = busy_ms < ms / 3
        rows.append(
            {
                "model": name,
                "mode": mode,
                "step_ms": round(ms, 4),
                "kernels": kernels,
                "gpu_busy_ms": round(busy_ms, 4),
                "host_bound": host_bound,
                "host_us_per_kernel": round(1e3 * ms / kernels, 2) if kernels else None,
            }
        )
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    dev = torch.device("cuda")
    rows: list[dict[str, object]] = []
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        try:
            rows += measure(name, dev, args.iters)
        except Exception as exc:  # one model failing to build must not lose the others
            print(f"{name}: {type(exc).__name__}: {exc}", flush=True)
        torch.cuda.empty_cache()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
