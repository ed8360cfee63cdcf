"""Record before/after trace pairs of realistic models, each pair differing by one change that
the findings catalogue should name: written-out attention vs SDPA (Hugging Face GPT-2 built from
a config), NCHW vs channels_last convolutions in bf16 (torchvision ResNet-50), zero_grad with
and without set_to_none, an unfused chain of elementwise ops vs torch.compile, and a first
convolution with 3 input channels vs padded to 4.

On a CUDA machine:   python3 sample_traces/make_model_pairs.py --out sample_traces/models
On a CPU-only one:   python3 sample_traces/make_model_pairs.py --smoke --out /tmp/pairs
``--only attention,channels_last`` records some pairs.

Each variant's step is timed outside the profiler with CUDA events (mean ms/step over 10 steps
after warm-up) before it is profiled: the ground truth of what the change saves. The table is
printed and written as ``model_timings.json`` beside the traces. Nothing is downloaded: models
are built from configs with random weights.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import record, time_step

Step = Callable[[], object]


def train_step(model: nn.Module, opt: torch.optim.Optimizer, batch: Callable[[], object], *, set_to_none: bool = True) -> Step:
    def step() -> object:
        opt.zero_grad(set_to_none=set_to_none)
        with torch.autocast("cuda" if torch.cuda.is_available() else "cpu", dtype=torch.bfloat16):
            out = batch()
        loss = out.float().pow(2).mean() if isinstance(out, torch.Tensor) else out.loss  # type: ignore[attr-defined]
        loss.backward()
        opt.step()
        return loss

    return step


def gpt2(smoke: bool, attn: str) -> tuple[nn.Module, torch.Tensor]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_layer=2 if smoke else 6, n_embd=64 if smoke else 768, n_head=4 if smoke else 12,
        n_positions=1024, vocab_size=50257, attn_implementation=attn,
    )
    model = GPT2LMHeadModel(cfg)
    seq, batch = (64, 2) if smoke else (1024, 8)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    return model, ids


def attention(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    torch.manual_seed(0)
    model, ids = gpt2(smoke, "sdpa" if after else "eager")
    model, ids = model.to(dev), ids.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    what = 'GPT-2 (6 layers, seq 1024) attn_implementation="sdpa"' if after else 'GPT-2 attn_implementation="eager" (matmul, softmax, matmul)'
    return train_step(model, opt, lambda: model(input_ids=ids, labels=ids)), what


def attention_fusion(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    """The fusion alone: Hugging Face's eager path also builds its attention mask with a blocking
    device-to-host copy once per forward, which the sdpa path does not; "after" is sdpa with a
    stream sync at the same place (before the first block), so the pair differs only by the
    attention kernels."""
    if not after:
        return attention(dev, smoke, after=False)
    torch.manual_seed(0)
    model, ids = gpt2(smoke, "sdpa")
    model, ids = model.to(dev), ids.to(dev)
    if dev.type == "cuda":
        model.transformer.h[0].register_forward_pre_hook(lambda *_: torch.cuda.current_stream().synchronize())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    what = 'GPT-2 attn_implementation="sdpa" with a stream sync before the first block (as the eager mask\'s copy)'
    return train_step(model, opt, lambda: model(input_ids=ids, labels=ids)), what


def resnet(dev: torch.device, smoke: bool, channels_last: bool, *, set_to_none: bool = True, batch: int = 64) -> Step:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).to(dev)
    x = torch.randn(4 if smoke else batch, 3, 64 if smoke else 224, 64 if smoke else 224, device=dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    return train_step(model, opt, lambda: model(x), set_to_none=set_to_none)


def channels_last(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    what = "ResNet-50 bf16 autocast, channels_last model and input" if after else "ResNet-50 bf16 autocast, NCHW (contiguous) model and input"
    return resnet(dev, smoke, after), what


def channels_last_256(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    # At batch 64 the profiled step is launch-bound and the change is within the run-to-run
    # spread; at 256 the GPU's work sets the step, which is where the layout matters.
    what = "ResNet-50 bf16 autocast batch 256, channels_last" if after else "ResNet-50 bf16 autocast batch 256, NCHW"
    return resnet(dev, smoke, after, batch=256), what


def zero_grad(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    # Many small parameters, a short step: the per-parameter zeroing is visible.
    cfg = GPT2Config(n_layer=2 if smoke else 12, n_embd=64 if smoke else 256, n_head=4, n_positions=256, vocab_size=8192)
    model = GPT2LMHeadModel(cfg).to(dev)
    ids = torch.randint(0, cfg.vocab_size, (2, 64 if smoke else 128), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    what = "optimizer.zero_grad() (set_to_none=True, the default)" if after else "optimizer.zero_grad(set_to_none=False): gradients zeroed in place every step"
    return train_step(model, opt, lambda: model(input_ids=ids, labels=ids), set_to_none=after), what


def fusion(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    torch.manual_seed(0)
    rows, width = (64, 256) if smoke else (16384, 4096)
    x = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)
    w = torch.randn(width, device=dev, dtype=torch.bfloat16)
    b = torch.randn(width, device=dev, dtype=torch.bfloat16)

    def chain(t: torch.Tensor) -> torch.Tensor:
        # bias, tanh-GELU written out, scale, residual, RMS-norm written out: each op its own kernel in eager
        h = t * w + b
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        h = h * 0.5 + t
        return h * torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(h.dtype)

    fn = torch.compile(chain) if after else chain

    def step() -> object:
        return fn(x)

    what = "elementwise chain (bias, GELU, residual, RMS norm) under torch.compile" if after else "the same chain in eager: one kernel per op over a 16384x4096 bf16 tensor"
    return step, what


def input_padding(dev: torch.device, smoke: bool, after: bool) -> tuple[Step, str]:
    torch.manual_seed(0)
    cin = 4 if after else 3
    stem = nn.Sequential(nn.Conv2d(cin, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU()).to(dev)
    stem = stem.to(memory_format=torch.channels_last)
    x = torch.randn(4 if smoke else 256, cin, 64 if smoke else 224, 64 if smoke else 224, device=dev).contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(stem.parameters(), lr=0.1)
    what = "first convolution with its input padded to 4 channels (channels_last, bf16)" if after else "first convolution with 3 input channels (channels_last, bf16)"
    return train_step(stem, opt, lambda: stem(x)), what


PAIRS: dict[str, Callable[[torch.device, bool, bool], tuple[Step, str]]] = {
    "attention": attention,
    "attention_fusion": attention_fusion,
    "channels_last": channels_last,
    "channels_last_256": channels_last_256,
    "zero_grad": zero_grad,
    "fusion": fusion,
    "input_padding": input_padding,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "models")
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--timings", default="model_timings.json", help="file name of the table written beside the traces")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(PAIRS)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    dev = torch.device("cuda" if cuda else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}", flush=True)
    rows, failed = [], []
    for name in names:
        row: dict[str, object] = {"pair": name}
        try:
            for side in ("before", "after"):
                step, what = PAIRS[name](dev, args.smoke, side == "after")
                ms = time_step(step, cuda)
                written = record(step, args.out / f"model_{name}_{side}.json.gz", cuda)
                row[f"{side}_ms"] = round(ms, 3)
                row[f"{side}_what"] = what
                row[f"{side}_bytes"] = written.stat().st_size
                print(f"{name} {side}: {ms:.3f} ms/step [{what}] {written.name} {written.stat().st_size:,} bytes", flush=True)
                del step
                if cuda:
                    torch.cuda.empty_cache()
            before, after = float(row["before_ms"]), float(row["after_ms"])  # type: ignore[arg-type]
            row["saving_pct"] = round(100 * (before - after) / before, 1)
            rows.append(row)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    print("\npair | before ms/step | after ms/step | saving %")
    for r in rows:
        print(f"{r['pair']} | {r['before_ms']} | {r['after_ms']} | {r['saving_pct']}")
    (args.out / args.timings).write_text(json.dumps(rows, indent=1) + "\n")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
