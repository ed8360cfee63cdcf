"""Record before/after trace pairs of realistic models, each pair differing by one cause in the
host code that makes the GPU wait: a loop of identical launches (a per-parameter EMA of the
weights), the caching allocator emptied every batch, a sync from boolean indexing in the loss,
and a model compiled with a debugging backend (compiled, but nothing generated runs).

On a CUDA machine:   python3 sample_traces/make_cause_pairs.py --out sample_traces/causes
On a CPU-only one:   python3 sample_traces/make_cause_pairs.py --smoke --out /tmp/causes
(``--smoke`` shrinks every size and runs on the CPU to check the script; those traces are not
the published samples.) ``--only repeat,boolmask`` records some pairs.

Each pair writes ``cause_<pair>_before.json.gz`` and ``cause_<pair>_after.json.gz``. Before it
is profiled, each variant's step is timed outside the profiler with CUDA events (mean ms/step
over 10 steps after warm-up): the ground truth of what the fix saves. The profiled run leaves
its first two steps unrecorded (``wait=2``), which ``profile`` times too: the trace carries its
own step without the profiler. The table is printed and written as ``cause_timings.json``
beside the traces, in the format of ``fix_timings.json``. Models are built from configs with
random weights (Hugging Face transformers); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces import cuda_timing
from traceinsight.capture import Schedule, profile

Step = Callable[[], object]
# wait=2: the unrecorded steps are timed by profile() (the step without the profiler).
SCHEDULE = Schedule(wait=2, warmup=1, active=4)


@dataclass
class Ctx:
    out: Path
    smoke: bool
    device: torch.device

    def size(self, full: int, smoke: int) -> int:
        return smoke if self.smoke else full

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


@dataclass
class Variant:
    step: Step
    what: str
    with_stack: bool = False


def time_step(ctx: Ctx, step: Step, warmup: int = 3, iters: int = 10) -> float:
    """Mean ms per step, outside the profiler (``cuda_timing.time_step``: CUDA events on a GPU,
    perf_counter on the CPU)."""
    return cuda_timing.time_step(step, ctx.cuda, warmup=warmup, iters=iters)


def record(ctx: Ctx, name: str, variant: Variant) -> Path:
    s = SCHEDULE
    n_steps = s.skip_first + s.wait + s.warmup + s.active
    path = ctx.out / f"{name}.json.gz"
    with profile(path, schedule=s, record_shapes=True, with_stack=variant.with_stack) as prof:
        for _ in range(n_steps):
            variant.step()
            prof.step()
    ctx.sync()
    if not prof.paths:
        raise RuntimeError(f"{name}: no trace written")
    return prof.paths[0]


def bert_config(ctx: Ctx, layers: int, **kw: object) -> object:
    from transformers import BertConfig

    return BertConfig(
        num_hidden_layers=ctx.size(layers, 2),
        hidden_size=ctx.size(768, 64),
        num_attention_heads=ctx.size(12, 4),
        intermediate_size=ctx.size(3072, 128),
        attn_implementation="sdpa",
        **kw,
    )


# ---- pairs: each returns one side of the pair; <pair>(ctx, after) ---------------------------


def repeat(ctx: Ctx, after: bool) -> Variant:
    """BERT-base (6 layers) fine-tuning with an exponential moving average of the weights.
    Before: timm's ModelEmaV2 update, one parameter at a time (4 small kernels per parameter);
    after: the same EMA as one foreach lerp over all parameters (timm's ModelEmaV3)."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(bert_config(ctx, 6, num_labels=4)).to(ctx.device)
    ema = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=ctx.cuda)
    batch, seq = ctx.size(8, 2), ctx.size(128, 16)
    ids = torch.randint(0, 30522 if not ctx.smoke else 1000, (batch, seq), device=ctx.device)
    labels = torch.randint(0, 4, (batch,), device=ctx.device)
    decay = 0.999

    @torch.no_grad()
    def ema_update() -> None:
        params = [p.detach() for p in model.parameters()]
        if after:
            torch._foreach_lerp_(ema, params, 1.0 - decay)
        else:
            for e, p in zip(ema, params, strict=True):
                e.copy_(e * decay + (1.0 - decay) * p)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        ema_update()
        return loss

    n = len(ema)
    what = (
        f"EMA of {n} parameters as one torch._foreach_lerp_"
        if after
        else f"EMA updated per parameter in a Python loop ({n} parameters x 4 kernels)"
    )
    return Variant(step, what, with_stack=True)


def alloc(ctx: Ctx, after: bool) -> Variant:
    """GPT-2 (6 layers) scoring batches in an evaluation loop. Before: torch.cuda.empty_cache()
    after every batch ("to keep memory low"); after: the caching allocator left alone."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=ctx.size(6, 2), n_embd=ctx.size(768, 64), n_head=ctx.size(12, 4),
        n_positions=1024, vocab_size=ctx.size(50257, 1000), attn_implementation="sdpa",
    )
    model = GPT2LMHeadModel(cfg).to(ctx.device).eval()
    batch, seq = ctx.size(4, 2), ctx.size(256, 16)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device=ctx.device)

    @torch.no_grad()
    def step() -> object:
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            logits = model(input_ids=ids).logits
        nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
        del logits
        if not after and ctx.cuda:
            torch.cuda.empty_cache()
        return nll

    what = "caching allocator left alone" if after else "torch.cuda.empty_cache() after every batch"
    return Variant(step, what)


def boolmask(ctx: Ctx, after: bool, batch: int = 16) -> Variant:
    """BERT-base (6 layers) token classification on padded batches of ``batch`` × 128, the loss
    over real tokens. Before: the padded positions dropped by boolean indexing
    (``logits[active]``: a nonzero that waits for the GPU); after: padded labels set to -100 and
    ignored by the loss."""
    from transformers import BertForTokenClassification

    torch.manual_seed(0)
    n_labels = 9
    model = BertForTokenClassification(bert_config(ctx, 6, num_labels=n_labels)).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=ctx.cuda)
    batch, seq = ctx.size(batch, 2), ctx.size(128, 16)
    ids = torch.randint(0, 30522 if not ctx.smoke else 1000, (batch, seq), device=ctx.device)
    lengths = torch.randint(seq // 4, seq + 1, (batch, 1), device=ctx.device)
    mask = (torch.arange(seq, device=ctx.device)[None, :] < lengths).long()
    labels = torch.randint(0, n_labels, (batch, seq), device=ctx.device)

    def loss_of(logits: torch.Tensor) -> torch.Tensor:
        flat = logits.view(-1, n_labels)
        if after:
            return F.cross_entropy(flat, labels.masked_fill(mask == 0, -100).view(-1), ignore_index=-100)
        active = mask.view(-1) == 1
        return F.cross_entropy(flat[active], labels.view(-1)[active])

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            logits = model(input_ids=ids, attention_mask=mask).logits
        loss = loss_of(logits.float())
        loss.backward()
        opt.step()
        return loss

    what = (
        "padded labels set to -100, cross_entropy(ignore_index=-100)"
        if after
        else "loss over logits[attention_mask == 1] (boolean indexing)"
    )
    return Variant(step, what)


def compile_eager(ctx: Ctx, after: bool) -> Variant:
    """BERT-base (6 layers) inference at batch 1 under torch.compile. Before: compiled with
    backend="eager" (a debugging backend: Dynamo captures the graph, nothing is generated);
    after: the default backend (Inductor)."""
    from transformers import BertModel

    torch.manual_seed(0)
    torch._dynamo.reset()
    model = BertModel(bert_config(ctx, 6)).to(ctx.device).eval()
    seq = ctx.size(128, 16)
    ids = torch.randint(0, 30522 if not ctx.smoke else 1000, (1, seq), device=ctx.device)
    # the smoke run checks the Dynamo path without compiling C++
    backend = "inductor" if after and ctx.cuda else "eager"
    fn = torch.compile(model, backend=backend)

    @torch.no_grad()
    def step() -> object:
        return fn(input_ids=ids).last_hidden_state

    what = 'torch.compile(model) (Inductor)' if after else 'torch.compile(model, backend="eager")'
    return Variant(step, what)


PAIRS: dict[str, Callable[[Ctx, bool], Variant]] = {
    "repeat": repeat,
    "alloc": alloc,
    "boolmask": boolmask,
    "compile_eager": compile_eager,
}


def describe(path: Path) -> str:
    from traceinsight.capture.merge import read_trace

    doc = read_trace(path)
    events = doc.get("traceEvents", [])
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation")
    capture = (doc.get("traceinsight") or {}).get("capture") or {}
    unprofiled = len((capture.get("unprofiled_steps") or {}).get("step") or [])
    return f"kernels={kernels} steps={steps} unprofiled_steps={unprofiled}"


def run_pair(ctx: Ctx, pair: str) -> dict[str, object]:
    row: dict[str, object] = {"pair": pair}
    for side in ("before", "after"):
        variant = PAIRS[pair](ctx, side == "after")
        t0 = time.perf_counter()
        ms = time_step(ctx, variant.step)
        path = record(ctx, f"cause_{pair}_{side}", variant)
        size = path.stat().st_size
        row[f"{side}_ms"] = round(ms, 3)
        row[f"{side}_what"] = variant.what
        row[f"{side}_bytes"] = size
        print(
            f"{pair} {side}: {ms:.3f} ms/step  [{variant.what}]  {path.name} {size:,} bytes "
            f"({time.perf_counter() - t0:.1f} s)  {describe(path)}",
            flush=True,
        )
        del variant
        if ctx.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    before, after = float(row["before_ms"]), float(row["after_ms"])  # type: ignore[arg-type]
    row["saving_pct"] = round(100 * (before - after) / before, 1) if before > 0 else None
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "causes")
    ap.add_argument("--only", default="", help="comma-separated pair names")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; runs on CPU")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(PAIRS)
    unknown = [n for n in names if n not in PAIRS]
    if unknown:
        ap.error(f"unknown pair(s) {unknown}; known: {', '.join(PAIRS)}")
    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    ctx = Ctx(out=args.out, smoke=args.smoke, device=torch.device("cuda" if cuda else "cpu"))
    args.out.mkdir(parents=True, exist_ok=True)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    print(
        f"torch {torch.__version__}, device {torch.cuda.get_device_name() if cuda else 'cpu'}, "
        f"smoke={args.smoke}",
        flush=True,
    )
    rows, failed = [], []
    for name in names:
        try:
            rows.append(run_pair(ctx, name))
        except Exception:
            traceback.print_exc()
            failed.append(name)
        finally:
            if cuda:
                torch.cuda.empty_cache()
    print("\npair | before ms/step | after ms/step | saving %")
    for r in rows:
        print(f"{r['pair']} | {r['before_ms']} | {r['after_ms']} | {r['saving_pct']}")
    (args.out / "cause_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
