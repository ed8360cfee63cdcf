"""Record the ground truth for the un-profiled step: each workload's step timed without the
profiler AND traced with it, in the same process.

For every workload (language and vision models built from configs, plain loops of large
and of tiny kernels, an eager decode loop): warm up, time ``--steps`` steps without the
profiler (a CUDA event at each step boundary on the current stream, no sync inside the
loop, and the host's wall clock), trace a few steps under ``torch.profiler`` with each
option set (``record_shapes=True`` always; on some workloads also without shapes,
``with_stack`` and ``profile_memory``), timing those steps the same way, then time the plain
loop again (the measured step is the median over both plain rounds). The traces are written
gzipped; ``realclock.json`` holds one row per workload with the measured steps.

Also records two runs through traceinsight's own ``profile()`` with a schedule that has
wait steps, whose traces carry the un-profiled steps capture timed.

On a CUDA machine:  python3 sample_traces/record_realclock.py --out /tmp/realclock
On a CPU-only one:  python3 sample_traces/record_realclock.py --smoke --out /tmp/realclock
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

Step = Callable[[], object]
DEV_TYPE = "cuda" if torch.cuda.is_available() else "cpu"
OPTIONS: dict[str, dict[str, bool]] = {
    "shapes": {"record_shapes": True},
    "no_shapes": {"record_shapes": False},
    "shapes_stack": {"record_shapes": True, "with_stack": True},
    "shapes_memory": {"record_shapes": True, "profile_memory": True},
}
# Workloads traced with every option set; the others with record_shapes=True only.
ALL_OPTIONS = ("gpt2_train", "resnet50_b32", "mlp_tiny", "vit_bf16")


def _train(model: nn.Module, forward: Callable[[], torch.Tensor], amp: bool, foreach: bool = True) -> Step:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(DEV_TYPE, dtype=torch.bfloat16, enabled=amp):
            out = forward()
        loss = out.float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def gpt2_train(dev: torch.device, smoke: bool) -> Step:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2) if smoke else GPT2Config()  # GPT-2 small, 124M
    model = GPT2LMHeadModel(cfg).to(dev)
    ids = torch.randint(0, cfg.vocab_size, (4, 256), device=dev)
    return _train(model, lambda: model(input_ids=ids).logits, amp=True)


def bert_train(dev: torch.device, smoke: bool) -> Step:
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128) if smoke else BertConfig()
    model = BertForMaskedLM(cfg).to(dev)
    ids = torch.randint(0, cfg.vocab_size, (16, 128), device=dev)
    return _train(model, lambda: model(input_ids=ids).logits, amp=True)


def bert_infer(dev: torch.device, smoke: bool) -> Step:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128) if smoke else BertConfig()
    model = BertModel(cfg).to(dev).eval()
    ids = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)

    def step() -> object:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            return model(input_ids=ids).last_hidden_state

    return step


def vit_bf16(dev: torch.device, smoke: bool) -> Step:
    import timm

    model = timm.create_model("vit_tiny_patch16_224" if smoke else "vit_base_patch16_224", pretrained=False)
    model = model.to(dev, dtype=torch.bfloat16)
    x = torch.randn(2 if smoke else 32, 3, 224, 224, device=dev, dtype=torch.bfloat16)
    return _train(model, lambda: model(x), amp=False)


def _resnet(dev: torch.device, batch: int) -> Step:
    import torchvision

    model = torchvision.models.resnet50(num_classes=1000).to(dev, memory_format=torch.channels_last)
    x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().mean()
        loss.backward()
        opt.step()
        return loss

    return step


def resnet50_b32(dev: torch.device, smoke: bool) -> Step:
    return _resnet(dev, 2 if smoke else 32)


def resnet50_b256(dev: torch.device, smoke: bool) -> Step:
    return _resnet(dev, 4 if smoke else 256)


def mlp_tiny(dev: torch.device, smoke: bool) -> Step:
    # thousands of tiny kernels: 100 narrow layers, per-parameter optimizer updates
    layers: list[nn.Module] = []
    for _ in range(10 if smoke else 100):
        layers += [nn.Linear(128, 128), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev)
    x = torch.randn(64, 128, device=dev)
    return _train(model, lambda: model(x), amp=False, foreach=False)


def big_gemm(dev: torch.device, smoke: bool) -> Step:
    n = 256 if smoke else 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty_like(a)

    def step() -> object:
        for _ in range(4):
            torch.matmul(a, b, out=c)
        return c

    return step


def elementwise_loop(dev: torch.device, smoke: bool) -> Step:
    x = torch.ones(4096, device=dev)

    def step() -> object:
        for _ in range(100 if smoke else 1000):
            x.mul_(1.0001).add_(1e-6)
        return x

    return step


def gpt2_decode(dev: torch.device, smoke: bool) -> Step:
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2) if smoke else GPT2Config(n_positions=4096)
    model = GPT2LMHeadModel(cfg).to(dev).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 64), device=dev)
    state: dict[str, Any] = {}

    def reset() -> None:
        cache = DynamicCache()
        with torch.no_grad():
            out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
        state.update(cache=out.past_key_values, token=out.logits[:, -1:].argmax(-1), n=0)

    reset()

    def step() -> object:
        if state["n"] >= 400:  # keep the context short and alike from round to round
            reset()
        with torch.no_grad():
            out = model(input_ids=state["token"], past_key_values=state["cache"], use_cache=True)
        state.update(cache=out.past_key_values, token=out.logits[:, -1:].argmax(-1), n=state["n"] + 1)
        return state["token"]

    return step


def _decode(model: nn.Module, vocab: int, dev: torch.device) -> Step:
    from transformers import DynamicCache

    prompt = torch.randint(0, vocab, (1, 64), device=dev)
    state: dict[str, Any] = {}

    def reset() -> None:
        with torch.no_grad():
            out = model(input_ids=prompt, past_key_values=DynamicCache(), use_cache=True)
        state.update(cache=out.past_key_values, token=out.logits[:, -1:].argmax(-1), n=0)

    reset()

    def step() -> object:
        if state["n"] >= 400:
            reset()
        with torch.no_grad():
            out = model(input_ids=state["token"], past_key_values=state["cache"], use_cache=True)
        state.update(cache=out.past_key_values, token=out.logits[:, -1:].argmax(-1), n=state["n"] + 1)
        return state["token"]

    return step


def llama_decode(dev: torch.device, smoke: bool) -> Step:
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, width = (2, 64) if smoke else (8, 512)
    cfg = LlamaConfig(hidden_size=width, intermediate_size=width * 8 // 3, num_hidden_layers=layers, num_attention_heads=8,
                      num_key_value_heads=8 if smoke else 4, vocab_size=32000, max_position_embeddings=4096)
    model = LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()
    return _decode(model, cfg.vocab_size, dev)


def t5_train(dev: torch.device, smoke: bool) -> Step:
    from transformers import T5Config, T5ForConditionalGeneration

    start = {"decoder_start_token_id": 0, "pad_token_id": 0}
    cfg = T5Config(d_model=64, num_layers=2, num_heads=2, d_ff=128, **start) if smoke else T5Config(d_model=512, num_layers=6, num_heads=8, d_ff=2048, **start)
    model = T5ForConditionalGeneration(cfg).to(dev)
    ids = torch.randint(0, cfg.vocab_size, (8, 128), device=dev)
    labels = torch.randint(0, cfg.vocab_size, (8, 32), device=dev)
    return _train(model, lambda: model(input_ids=ids, labels=labels).logits, amp=True)


def effnet_train(dev: torch.device, smoke: bool) -> Step:
    import timm

    model = timm.create_model("efficientnet_b0", pretrained=False).to(dev, memory_format=torch.channels_last)
    x = torch.randn(4 if smoke else 64, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    return _train(model, lambda: model(x), amp=True)


def convnext_infer(dev: torch.device, smoke: bool) -> Step:
    import timm

    model = timm.create_model("convnext_tiny", pretrained=False).to(dev, dtype=torch.bfloat16).eval()
    x = torch.randn(2 if smoke else 16, 3, 224, 224, device=dev, dtype=torch.bfloat16)

    def step() -> object:
        with torch.no_grad():
            return model(x)

    return step


def views_loop(dev: torch.device, smoke: bool) -> Step:
    # operator events without device work: views and reshapes only (and one kernel)
    y = torch.ones(64, 64, device=dev)

    def step() -> object:
        for _ in range(100 if smoke else 1000):
            y.t().reshape(-1).view(64, 64)
        return y.add_(0)

    return step


def python_loop(dev: torch.device, smoke: bool) -> Step:
    # host time in plain Python between few operators: does the profiler slow Python itself?
    x = torch.ones(4096, device=dev)

    def step() -> object:
        total = 0
        for i in range(20 if smoke else 200):
            for j in range(200):
                total += (i * j) % 7
            x.mul_(1.0)
        return total

    return step


# Recorded after the per-event cost was fitted on the others: held out (``--only`` them).
HELD_OUT = ("llama_decode", "t5_train", "effnet_train", "convnext_infer")

WORKLOADS: dict[str, Callable[[torch.device, bool], Step]] = {
    "llama_decode": llama_decode,
    "t5_train": t5_train,
    "effnet_train": effnet_train,
    "convnext_infer": convnext_infer,
    "views_loop": views_loop,
    "python_loop": python_loop,
    "gpt2_train": gpt2_train,
    "bert_train": bert_train,
    "bert_infer": bert_infer,
    "vit_bf16": vit_bf16,
    "resnet50_b32": resnet50_b32,
    "resnet50_b256": resnet50_b256,
    "mlp_tiny": mlp_tiny,
    "big_gemm": big_gemm,
    "elementwise_loop": elementwise_loop,
    "gpt2_decode": gpt2_decode,
}


class _WallEvent:
    """Stands in for a CUDA event in a CPU smoke run."""

    def record(self) -> None:
        self.t = time.perf_counter_ns()

    def elapsed_time(self, other: _WallEvent) -> float:
        return (other.t - self.t) / 1e6


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(step: Step, steps: int, on_step: Callable[[], None] | None = None) -> dict[str, Any]:
    """Per-step device ns (CUDA events at each step boundary, no sync inside) and wall ns.
    ``on_step`` (the profiler's step) runs after the boundary is stamped: the profiler's switch
    at the end of its last step (stopping, exporting) is no step's time."""
    _sync()
    cuda = torch.cuda.is_available()
    events = [torch.cuda.Event(enable_timing=True) if cuda else _WallEvent() for _ in range(steps + 1)]
    walls = [0] * (steps + 1)
    events[0].record()
    walls[0] = time.perf_counter_ns()
    for i in range(steps):
        step()
        events[i + 1].record()
        walls[i + 1] = time.perf_counter_ns()
        if on_step is not None:
            on_step()
    _sync()
    end_ns = time.perf_counter_ns()
    device = [round(events[i].elapsed_time(events[i + 1]) * 1e6) for i in range(steps)]
    return {
        "device_ns": device,
        "wall_ns": [walls[i + 1] - walls[i] for i in range(steps)],
        # the whole loop to the last work's end, per step: the throughput the program sees
        "total_wall_per_step_ns": round((end_ns - walls[0]) / steps),
    }


def profiled(step: Step, options: dict[str, bool], active: int, trace: Path) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile, schedule

    written: list[bool] = []

    def ready(prof: Any) -> None:
        prof.export_chrome_trace(str(trace))
        written.append(True)

    with profile(
        activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else []),
        schedule=schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=ready,
        **options,
    ) as prof:
        step()
        prof.step()  # the warm-up step
        times = timed(step, active, on_step=prof.step)
    assert written, "the profiler wrote no trace"
    return times


def gzip_to(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as g:
        shutil.copyfileobj(f, g)
    src.unlink()


def median(values: list[int]) -> int:
    return round(statistics.median(values))


def record(name: str, args: argparse.Namespace, dev: torch.device) -> dict[str, Any]:
    """Rounds of plain then profiled runs, alternating, so that a slow stretch of the host
    touches both; the trace kept per option set is the round whose profiled step is the median."""
    torch.manual_seed(0)
    step = WORKLOADS[name](dev, args.smoke)
    for _ in range(args.warmup):
        step()
    options = OPTIONS if name in ALL_OPTIONS and not args.shapes_only else {"shapes": OPTIONS["shapes"]}
    plain: list[dict[str, Any]] = []
    rounds: dict[str, list[dict[str, Any]]] = {opt: [] for opt in options}
    for r in range(args.rounds):
        plain.append(timed(step, args.steps))
        for opt, kwargs in options.items():
            raw = args.out / f"{name}.{opt}.r{r}.json"
            times = profiled(step, kwargs, args.active, raw)
            gzip_to(raw, args.out / f"{name}.{opt}.r{r}.json.gz")
            rounds[opt].append({**times, "median_device_ns": median(times["device_ns"]), "round": r})
    plain.append(timed(step, args.steps))
    runs: dict[str, Any] = {}
    for opt, found in rounds.items():
        ranked = sorted(found, key=lambda x: x["median_device_ns"])
        kept = ranked[len(ranked) // 2]
        for other in found:
            if other is not kept:
                (args.out / f"{name}.{opt}.r{other['round']}.json.gz").unlink()
        (args.out / f"{name}.{opt}.r{kept['round']}.json.gz").rename(args.out / f"{name}.{opt}.json.gz")
        runs[opt] = {**kept, "trace": f"{name}.{opt}.json.gz", "rounds_median_device_ns": [x["median_device_ns"] for x in found]}
        print(f"  {name} {opt}: profiled step {kept['median_device_ns'] / 1e6:.3f} ms "
              f"(rounds {[round(x['median_device_ns'] / 1e6, 2) for x in found]})", flush=True)
    device = [d for p in plain for d in p["device_ns"]]
    row = {
        "workload": name,
        "unprofiled_step_ns": median(device),
        "unprofiled_rounds_ns": [median(p["device_ns"]) for p in plain],
        "unprofiled_wall_per_step_ns": [p["total_wall_per_step_ns"] for p in plain],
        "unprofiled_device_ns": device,
        "profiled": runs,
    }
    print(f"{name}: un-profiled step {row['unprofiled_step_ns'] / 1e6:.3f} ms "
          f"(rounds {[round(x / 1e6, 2) for x in row['unprofiled_rounds_ns']]})", flush=True)
    del step
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return row


def capture_runs(args: argparse.Namespace, dev: torch.device) -> list[dict[str, Any]]:
    """Through traceinsight's profile(): a schedule with wait steps, which capture times."""
    from traceinsight.capture import profile as ti_profile

    rows = []
    for name in [n for n in args.capture.split(",") if n]:
        torch.manual_seed(0)
        step = WORKLOADS[name](dev, args.smoke)
        for _ in range(args.warmup):
            step()
        before = timed(step, args.steps)
        out = args.out / f"capture_{name}.json.gz"
        schedule = {"skip_first": 0, "wait": 4, "warmup": 1, "active": args.active, "repeat": 1}
        with ti_profile(out, schedule=schedule, record_shapes=True, nvml=False) as p:
            for _ in range(schedule["wait"] + schedule["warmup"] + args.active):
                step()
                p.step()
        with gzip.open(out, "rt") as f:
            timed_steps = json.load(f)["traceinsight"]["capture"].get("unprofiled_steps")
        rows.append({
            "workload": name, "trace": out.name, "schedule": schedule,
            "unprofiled_step_ns": median(before["device_ns"]), "capture_unprofiled_steps": timed_steps,
        })
        print(f"capture {name}: plain {median(before['device_ns']) / 1e6:.3f} ms, capture timed {timed_steps}", flush=True)
        del step
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--steps", type=int, default=10, help="plain steps timed per round")
    ap.add_argument("--rounds", type=int, default=3, help="plain/profiled rounds, alternating")
    ap.add_argument("--active", type=int, default=3, help="profiled steps per trace")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--shapes-only", action="store_true")
    ap.add_argument("--capture", default="resnet50_b32,mlp_tiny", help="workloads also run under traceinsight's profile()")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and not args.smoke:
        ap.error("needs a CUDA device (--smoke checks the script on CPU)")
    dev = torch.device(DEV_TYPE)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if DEV_TYPE == "cuda" else "cpu", "steps": args.steps, "active": args.active}
    print(meta, flush=True)
    rows = []
    for name in [n for n in args.only.split(",") if n] or [w for w in WORKLOADS if w not in HELD_OUT]:
        try:
            rows.append(record(name, args, dev))
        except Exception as exc:  # one broken workload must not lose the others
            print(f"{name}: FAILED {type(exc).__name__}: {exc}", flush=True)
        (args.out / "realclock.json").write_text(json.dumps({**meta, "recordings": rows}, indent=1) + "\n")
    captures = capture_runs(args, dev)
    (args.out / "realclock.json").write_text(json.dumps({**meta, "recordings": rows, "captures": captures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
