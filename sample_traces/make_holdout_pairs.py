"""Record before/after pairs that no pricing rule was developed on: held out to check the
findings' prices on workloads they were not built from. Each pair differs by one thing a user
writes; the fix is timed without the profiler with the variants interleaved (``--rounds``
rounds of ``--iters`` steps each, CUDA events, ``cuda_timing.time_step``), then each side is
profiled with shapes (schedule wait 2 / warmup 1 / active 4: the wait steps are timed too).

- ``vit_empty_cache``: a ViT-S/16 (timm, from its config) trained at batch 32 in bf16, with
  ``torch.cuda.empty_cache()`` at the end of every step; after: without it.
- ``metrics_sync``: a ResNet-18 (timm) trained at batch 64 on 128 px images, reading the loss
  and the batch accuracy on the host every step (``.item()``, ``.cpu().numpy()``) and logging
  them; after: both kept on the GPU and read every 10 steps.
- ``sync_then_prep``: GPT-2 (4 layers, transformers) trained at batch 8 × 256 with
  ``torch.cuda.synchronize()`` after the optimizer step and the next batch then built on the
  host (random token ids, padding and a mask, in Python); after: no synchronize, so the host
  builds the next batch while the GPU runs.
- ``ner_boolmask``: ``make_cause_pairs.py``'s ``boolmask`` (BERT-base token classification, the
  loss over the real tokens by boolean indexing, ``logits[mask]``: the host waits for the forward
  pass; after: padded labels set to -100 and ignored by the loss) at batch 8 instead of 16.
- ``resnet50_compile``: a ResNet-50 (torchvision, from its config) trained at batch 96 × 224 px
  under bf16 autocast in NCHW, eager; after: the model under ``torch.compile`` (Inductor), which
  fuses batch norm's passes with the activations around them. Checks the fusion price on a
  convolutional network.
- ``resnet50_channels_last``: the same eager step; after: model and input in channels_last.
- ``moe_experts``: a Mixtral-style model (transformers, 4 layers, 8 experts, top-2) trained at
  batch 8 × 256 in bf16 with the experts run by the eager implementation (a Python loop over
  the experts hit, each finding its tokens with ``torch.where`` on the routing mask: a sync per
  expert and layer); after: ``grouped_mm`` (one grouped GEMM per projection, no sync), or
  ``batched_mm`` where the GPU's grouped GEMM refuses; the implementation run is checked.

    python3 sample_traces/make_holdout_pairs.py --out sample_traces/holdout
    python3 sample_traces/make_holdout_pairs.py --smoke --out /tmp/holdout    # CPU check
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.make_cause_pairs import Ctx, Variant, boolmask, describe, record, time_step


def vit_empty_cache(ctx: Ctx, after: bool) -> Variant:
    import timm

    torch.manual_seed(0)
    size = ctx.size(224, 32)
    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=100, img_size=size).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    x = torch.randn(ctx.size(32, 2), 3, size, size, device=ctx.device)
    y = torch.randint(0, 100, (x.shape[0],), device=ctx.device)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if not after and ctx.cuda:
            torch.cuda.empty_cache()
        return loss

    return Variant(step, "allocator left alone" if after else "torch.cuda.empty_cache() at the end of every step")


def metrics_sync(ctx: Ctx, after: bool) -> Variant:
    import numpy as np
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=100).to(ctx.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    size = ctx.size(128, 32)
    x = torch.randn(ctx.size(64, 4), 3, size, size, device=ctx.device)
    y = torch.randint(0, 100, (x.shape[0],), device=ctx.device)
    y_host = y.cpu().numpy()
    log: list[dict[str, float]] = []
    state = {"n": 0, "loss": torch.zeros((), device=ctx.device), "correct": torch.zeros((), device=ctx.device)}

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        state["n"] += 1
        if after:
            state["loss"] += loss.detach()
            state["correct"] += (logits.detach().argmax(1) == y).sum()
            if state["n"] % 10 == 0:
                log.append({"loss": float(state["loss"].item()) / 10, "acc": float(state["correct"].item()) / (10 * len(y_host))})
                state["loss"].zero_()
                state["correct"].zero_()
        else:
            preds = logits.detach().argmax(1).cpu().numpy()
            log.append({"loss": loss.item(), "acc": float(np.mean(preds == y_host))})
        del log[:-100]
        return loss

    what = "loss and accuracy kept on the GPU, read every 10 steps" if after else "loss.item() and accuracy via .cpu().numpy() every step"
    return Variant(step, what)


def sync_then_prep(ctx: Ctx, after: bool) -> Variant:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=ctx.size(4, 2), n_embd=ctx.size(768, 64), n_head=ctx.size(12, 4),
        n_positions=1024, vocab_size=ctx.size(50257, 1000), attn_implementation="sdpa",
    )
    model = GPT2LMHeadModel(cfg).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    batch, seq = ctx.size(8, 2), ctx.size(256, 16)
    rng = random.Random(0)

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        # what a collate function does in Python: ragged token lists padded to the longest
        rows = [[rng.randrange(cfg.vocab_size) for _ in range(rng.randint(seq // 2, seq))] for _ in range(batch)]
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        return ids.pin_memory().to(ctx.device, non_blocking=True) if ctx.cuda else ids, mask.to(ctx.device)

    state = {"batch": next_batch()}

    def step() -> object:
        ids, mask = state["batch"]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        opt.step()
        if not after and ctx.cuda:
            torch.cuda.synchronize()
        state["batch"] = next_batch()
        return loss

    what = "next batch built while the GPU runs" if after else "torch.cuda.synchronize() after the step, then the next batch built"
    return Variant(step, what)


def ner_boolmask(ctx: Ctx, after: bool) -> Variant:
    """The ``boolmask`` cause pair (``make_cause_pairs.py``: BERT-base, 6 layers, token
    classification, ``logits[mask]`` against ``ignore_index=-100``) at batch 8 × 128, where the
    host's launches are nearer the step's critical path than at the cause pair's batch 16."""
    return boolmask(ctx, after, batch=8)


def _resnet50(ctx: Ctx, compiled: bool, channels_last: bool) -> Variant:
    import torchvision

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    torch._dynamo.reset()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = torchvision.models.resnet50(num_classes=1000).to(ctx.device, memory_format=fmt)
    size = ctx.size(224, 64)
    x = torch.randn(ctx.size(96, 4), 3, size, size, device=ctx.device).to(memory_format=fmt)
    y = torch.randint(0, 1000, (x.shape[0],), device=ctx.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    # the smoke run checks the Dynamo path without compiling C++
    forward = torch.compile(model, backend="inductor" if ctx.cuda else "eager") if compiled else model

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        return loss

    what = "ResNet-50 bf16 autocast, batch 96, NCHW, eager"
    if compiled:
        what = "the same under torch.compile(model) (Inductor)"
    elif channels_last:
        what = "the same with model and input in channels_last"
    return Variant(step, what)


def resnet50_compile(ctx: Ctx, after: bool) -> Variant:
    return _resnet50(ctx, compiled=after, channels_last=False)


def resnet50_channels_last(ctx: Ctx, after: bool) -> Variant:
    return _resnet50(ctx, compiled=False, channels_last=after)


def moe_experts(ctx: Ctx, after: bool) -> Variant:
    # grouped GEMMs need a GPU; batched_mm (one bmm per projection) is the fallback where a
    # GPU's grouped_mm refuses this dtype or shape: both run without a sync per expert
    impls = (["grouped_mm", "batched_mm"] if ctx.cuda else ["batched_mm"]) if after else ["eager"]
    for impl in impls:
        try:
            return _moe(ctx, impl)
        except Exception as exc:  # the next implementation, said on the console
            print(f"moe_experts: {impl} failed ({type(exc).__name__}: {exc}); trying the next", flush=True)
    raise RuntimeError("moe_experts: no experts implementation ran")


def _moe(ctx: Ctx, impl: str) -> Variant:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    config = MixtralConfig(
        vocab_size=ctx.size(32000, 1000),
        hidden_size=ctx.size(512, 64),
        intermediate_size=ctx.size(1024, 128),
        num_hidden_layers=ctx.size(4, 2),
        num_attention_heads=ctx.size(8, 4),
        num_key_value_heads=ctx.size(8, 4),
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=512,
        attn_implementation="sdpa",
    )
    config._experts_implementation = impl
    model = MixtralForCausalLM(config).to(ctx.device)
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(impl)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    ids = torch.randint(0, config.vocab_size, (ctx.size(8, 2), ctx.size(256, 32)), device=ctx.device)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss

    step()  # raises here, not in the timed rounds, where this implementation cannot run
    used = getattr(model.config, "_experts_implementation", impl)
    if used != impl:
        raise RuntimeError(f"asked for {impl}, the model runs {used}")
    what = f'experts_implementation="{used}"' + (" (a loop over the experts hit, torch.where per expert)" if impl == "eager" else "")
    return Variant(step, what)


PAIRS = {
    "vit_empty_cache": vit_empty_cache, "metrics_sync": metrics_sync, "sync_then_prep": sync_then_prep,
    "ner_boolmask": ner_boolmask, "resnet50_compile": resnet50_compile,
    "resnet50_channels_last": resnet50_channels_last, "moe_experts": moe_experts,
}


def run_pair(ctx: Ctx, pair: str, rounds: int, iters: int, prewarm: int = 0) -> dict[str, object]:
    sides = {side: PAIRS[pair](ctx, side == "after") for side in ("before", "after")}
    for side in sides.values():  # steps run before any is timed (shapes met, caches filled)
        for _ in range(prewarm):
            side.step()
    ms: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(rounds):
        for side in ("before", "after"):
            ms[side].append(time_step(ctx, sides[side].step, iters=iters))
    row: dict[str, object] = {"pair": pair}
    for side in ("before", "after"):
        path = record(ctx, f"holdout_{pair}_{side}", sides[side])
        row[f"{side}_ms"] = round(statistics.mean(ms[side]), 3)
        row[f"{side}_sd_ms"] = round(statistics.stdev(ms[side]), 3) if rounds > 1 else 0.0
        row[f"{side}_median_ms"] = round(statistics.median(ms[side]), 3)
        row[f"{side}_rounds_ms"] = [round(v, 3) for v in ms[side]]
        row[f"{side}_what"] = sides[side].what
        row[f"{side}_bytes"] = path.stat().st_size
        print(f"{pair} {side}: {row[f'{side}_ms']} ms/step (sd {row[f'{side}_sd_ms']})  {path.name}  {describe(path)}", flush=True)
    b, a = statistics.mean(ms["before"]), statistics.mean(ms["after"])
    row["rounds"], row["iters"], row["prewarm_steps"] = rounds, iters, prewarm
    row["saving_pct"] = round(100 * (b - a) / b, 1) if b > 0 else None
    # rounds can hold an outlier (a round that met new shapes or another process): the medians too
    mb, ma = statistics.median(ms["before"]), statistics.median(ms["after"])
    row["median_saving_pct"] = round(100 * (mb - ma) / mb, 1) if mb > 0 else None
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "holdout")
    ap.add_argument("--only", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--prewarm", type=int, default=0, help="steps each side runs before the timed rounds")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; runs on CPU")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(PAIRS)
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    ctx = Ctx(out=args.out, smoke=args.smoke, device=torch.device("cuda" if cuda else "cpu"))
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}", flush=True)
    rows, failed = [], []
    for name in names:
        try:
            rows.append(run_pair(ctx, name, args.rounds, args.iters, args.prewarm))
        except Exception:
            traceback.print_exc()
            failed.append(name)
        if cuda:
            torch.cuda.empty_cache()
    (args.out / "holdout_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(f"{r['pair']} | {r['before_ms']} | {r['after_ms']} | {r['saving_pct']}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
