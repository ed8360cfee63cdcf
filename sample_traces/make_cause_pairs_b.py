"""Record before/after trace pairs whose fix is a specific thing in the user's code, each with a
realistic model built from its config (nothing is downloaded):

- ``dataloader_cpu``: ResNet-18 (torchvision, bf16 autocast) fed by a DataLoader whose workers
  run heavy per-sample CPU augmentation (random resized crop, colour jitter, Gaussian blur on
  every image). Four workers cannot keep up, nor can as many as the machine's cores allow
  (``more_workers``: timed only). The fix makes the per-batch CPU work cheap: the workers only
  hand over the stored uint8 images and the same augmentation runs on the GPU, batched.
- ``precision``: ResNet-50 (torchvision) trained in fp32 with TF32 off (``fp32``), with TF32 on
  for matmuls and cuDNN convolutions (``tf32``), and under bf16 autocast (``bf16``): three runs,
  two pairs (``precision_tf32``: fp32 → tf32, ``precision_bf16``: fp32 → bf16).
- ``attention_block``: a timm Vision Transformer at 384 px (577 tokens, bf16 autocast) with its
  attention written out (q @ kᵀ, softmax, @ v: timm's ``fused_attn=False`` path) vs
  ``F.scaled_dot_product_attention`` (``fused_attn=True``), nothing else changed.

On a CUDA machine:   python3 sample_traces/make_cause_pairs_b.py --out sample_traces/causes_b
On a CPU-only one:   python3 sample_traces/make_cause_pairs_b.py --smoke --out /tmp/causes_b

Each variant's step is timed outside the profiler with CUDA events around 10 steps after
warm-up (idle time included: a step waiting on the DataLoader counts), before the same steps
are profiled; the profiled run's skipped steps are also timed into the trace's metadata. The
table is printed and written as ``cause_timings_b.json`` beside the traces.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step
from traceinsight.capture import Schedule, profile

Step = Callable[[], object]
# Skipped steps (timed into the metadata), one warm-up, three recorded: small traces.
CAUSE_SCHEDULE = Schedule(wait=3, warmup=1, active=3)


def record(step: Step, path: Path, cuda: bool) -> Path:
    n = CAUSE_SCHEDULE.wait + CAUSE_SCHEDULE.warmup + CAUSE_SCHEDULE.active
    with profile(path, schedule=CAUSE_SCHEDULE, record_shapes=True) as prof:
        for _ in range(n):
            step()
            prof.step()
    if cuda:
        torch.cuda.synchronize()
    return prof.paths[0] if prof.paths else path


def autocast(dev: torch.device, enabled: bool = True) -> torch.autocast:
    return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=enabled)


# ---------------------------------------------------------------- data loading


class StoredImages(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    """Decoded uint8 images (as a cache of decoded JPEGs would hold them), optionally augmented
    per sample on the CPU in the worker, as torchvision's transforms are usually applied."""

    def __init__(self, n: int, side: int, out: int, cpu_augment: bool) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (64, 3, side, side), dtype=torch.uint8, generator=g)
        self.n, self.out, self.cpu_augment = n, out, cpu_augment
        from torchvision.transforms import v2

        self.tf = v2.Compose([
            v2.RandomResizedCrop(out, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ColorJitter(0.4, 0.4, 0.4, 0.1),
            v2.GaussianBlur(9, sigma=(0.1, 2.0)),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        img = self.images[i % len(self.images)]
        if self.cpu_augment:
            return self.tf(img), i % 1000
        # the cheap path: a fixed centre crop of the stored image; augmentation runs on the GPU
        off = (img.shape[-1] - self.out) // 2
        return img[:, off : off + self.out, off : off + self.out].contiguous(), i % 1000


MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def gpu_augment(x: torch.Tensor) -> torch.Tensor:
    """The same kind of augmentation, batched on the device: flip, brightness/contrast jitter,
    3x3 blur, normalise."""
    x = x.float().div_(255)
    flip = torch.rand(x.shape[0], 1, 1, 1, device=x.device) < 0.5
    x = torch.where(flip, x.flip(-1), x)
    b = 1 + (torch.rand(x.shape[0], 1, 1, 1, device=x.device) - 0.5) * 0.8
    c = 1 + (torch.rand(x.shape[0], 1, 1, 1, device=x.device) - 0.5) * 0.8
    m = x.mean(dim=(1, 2, 3), keepdim=True)
    x = ((x * b - m) * c + m).clamp_(0, 1)
    k = torch.full((3, 1, 3, 3), 1 / 9, device=x.device)
    x = F.conv2d(x, k, padding=1, groups=3)
    return (x - MEAN.to(x.device)) / STD.to(x.device)


def loader_step(dev: torch.device, smoke: bool, workers: int, cpu_augment: bool) -> tuple[Step, Callable[[], None]]:
    import torchvision

    torch.manual_seed(0)
    side, out, batch = (72, 64, 8) if smoke else (256, 224, 128)
    ds = StoredImages(10_000_000, side, out, cpu_augment)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=batch, num_workers=workers, pin_memory=dev.type == "cuda",
        persistent_workers=workers > 0, prefetch_factor=2 if workers else None, shuffle=False,
    )
    model = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    it: Iterator[tuple[torch.Tensor, torch.Tensor]] = iter(loader)

    def step() -> object:
        x, y = next(it)
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        if not cpu_augment:
            x = gpu_augment(x)
        x = x.contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with autocast(dev):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # drain what the workers prefetched while starting, so timing and trace see the steady state
    def drain() -> None:
        for _ in range(max(workers, 1) * 2 + 2):
            step()

    return step, drain


def dataloader_cpu(dev: torch.device, smoke: bool, side: str) -> tuple[Step, Callable[[], None], str]:
    if side == "before":
        step, drain = loader_step(dev, smoke, 2 if smoke else 4, cpu_augment=True)
        return step, drain, "ResNet-18 bf16, batch 128; 4 DataLoader workers each running per-sample CPU augmentation (RandomResizedCrop, ColorJitter, GaussianBlur 9x9)"
    if side == "more_workers":
        n = 2 if smoke else max(4, min(16, (os.cpu_count() or 4) - 2))
        step, drain = loader_step(dev, smoke, n, cpu_augment=True)
        return step, drain, f"the same with {n} workers (the machine's cores less two)"
    step, drain = loader_step(dev, smoke, 2 if smoke else 4, cpu_augment=False)
    return step, drain, "4 workers hand over stored uint8 crops; flip, jitter, blur, normalise batched on the GPU"


# ---------------------------------------------------------------- precision


def precision(dev: torch.device, smoke: bool, side: str) -> tuple[Step, Callable[[], None], str]:
    import torchvision

    tf32 = side == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000).to(dev)
    x = torch.randn(4 if smoke else 96, 3, 64 if smoke else 224, 64 if smoke else 224, device=dev)
    y = torch.randint(0, 1000, (x.shape[0],), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    bf16 = side == "bf16"

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with autocast(dev, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    what = {
        "fp32": "ResNet-50 fp32 training, batch 96, TF32 off for matmuls and cuDNN",
        "tf32": "the same with torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True",
        "bf16": "the same under torch.autocast(dtype=torch.bfloat16), TF32 off",
    }[side]
    return step, lambda: None, what


# ---------------------------------------------------------------- attention


def attention_block(dev: torch.device, smoke: bool, side: str) -> tuple[Step, Callable[[], None], str]:
    from timm.models.vision_transformer import VisionTransformer

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    img = 64 if smoke else 384
    model = VisionTransformer(
        img_size=img, patch_size=16, embed_dim=64 if smoke else 768, depth=2 if smoke else 8,
        num_heads=4 if smoke else 12, num_classes=1000,
    ).to(dev)
    fused = side == "after"
    for blk in model.blocks:
        blk.attn.fused_attn = fused  # timm's switch: F.scaled_dot_product_attention or written out
    x = torch.randn(2 if smoke else 32, 3, img, img, device=dev)
    y = torch.randint(0, 1000, (x.shape[0],), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with autocast(dev):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    what = (
        "ViT-B/16-style (8 blocks) at 384 px, 577 tokens, bf16: F.scaled_dot_product_attention (timm fused_attn=True)"
        if fused
        else "the same with attention written out: q @ k.T * scale, softmax, @ v (timm fused_attn=False)"
    )
    return step, lambda: None, what


# (pair, variant recorded as "before", variants after it; None = timed only)
RUNS: dict[str, tuple[Callable[[torch.device, bool, str], tuple[Step, Callable[[], None], str]], tuple[tuple[str, bool], ...]]] = {
    "dataloader_cpu": (dataloader_cpu, (("before", True), ("more_workers", False), ("after", True))),
    "precision": (precision, (("fp32", True), ("tf32", True), ("bf16", True))),
    "attention_block": (attention_block, (("before", True), ("after", True))),
}
# pair name in the table -> (run, before variant, after variant)
PAIRS = {
    "dataloader_cpu": ("dataloader_cpu", "before", "after"),
    "dataloader_more_workers": ("dataloader_cpu", "before", "more_workers"),
    "precision_tf32": ("precision", "fp32", "tf32"),
    "precision_bf16": ("precision", "fp32", "bf16"),
    "attention_block": ("attention_block", "before", "after"),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "causes_b")
    ap.add_argument("--only", default="")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(RUNS)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    dev = torch.device("cuda" if cuda else "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}, {os.cpu_count()} CPUs", flush=True)
    ms: dict[tuple[str, str], float] = {}
    what: dict[tuple[str, str], str] = {}
    size: dict[tuple[str, str], int] = {}
    failed = []
    for name in names:
        fn, variants = RUNS[name]
        for variant, traced in variants:
            try:
                step, drain, w = fn(dev, args.smoke, variant)
                drain()
                ms[(name, variant)] = time_step(step, cuda)
                what[(name, variant)] = w
                msg = f"{name} {variant}: {ms[(name, variant)]:.3f} ms/step [{w}]"
                if traced:
                    p = record(step, args.out / f"{name}_{variant}.json.gz", cuda)
                    size[(name, variant)] = p.stat().st_size
                    msg += f" {p.name} {p.stat().st_size:,} bytes"
                print(msg, flush=True)
                del step, drain
                if cuda:
                    torch.cuda.empty_cache()
            except Exception:
                traceback.print_exc()
                failed.append(f"{name}/{variant}")
    rows = []
    for pair, (run, b, a) in PAIRS.items():
        if (run, b) in ms and (run, a) in ms:
            before, after = ms[(run, b)], ms[(run, a)]
            rows.append({
                "pair": pair, "before": f"{run}_{b}", "after": f"{run}_{a}",
                "before_ms": round(before, 3), "after_ms": round(after, 3),
                "saving_pct": round(100 * (before - after) / before, 1),
                "before_what": what[(run, b)], "after_what": what[(run, a)],
            })
    print("\npair | before ms/step | after ms/step | saving %")
    for r in rows:
        print(f"{r['pair']} | {r['before_ms']} | {r['after_ms']} | {r['saving_pct']}")
    (args.out / "cause_timings_b.json").write_text(json.dumps(rows, indent=1) + "\n")
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
