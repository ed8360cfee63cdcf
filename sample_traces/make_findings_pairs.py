"""Record before/after trace pairs, each pair differing by one well-known performance fix.

On a CUDA machine:   python3 sample_traces/make_findings_pairs.py --out sample_traces
On a CPU-only one:   python3 sample_traces/make_findings_pairs.py --smoke --out /tmp/pairs
(``--smoke`` shrinks every size and runs on the CPU to check the script; those traces are not
the published samples.) ``--only tf32,bmm`` records some pairs.

Each pair writes ``fix_<pair>_before.json.gz`` and ``fix_<pair>_after.json.gz``. Before it is
profiled, each variant's step is timed outside the profiler with CUDA events (mean ms/step over
a few steps after warm-up): the ground truth of what the fix saves. The table is printed at the
end and written as ``fix_timings.json`` beside the traces.
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
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traceinsight.capture import Schedule, profile

Step = Callable[[], object]
SCHEDULE = Schedule(wait=1, warmup=2, active=8)


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
    """One side of a pair: a step function and a one-line description of it."""

    step: Step
    what: str
    schedule: Schedule = SCHEDULE


def set_tf32(on: bool) -> None:
    # Every scenario states its matmul precision, so no pair inherits another's setting.
    torch.set_float32_matmul_precision("high" if on else "highest")
    torch.backends.cuda.matmul.allow_tf32 = on


def time_step(ctx: Ctx, step: Step, warmup: int = 3, iters: int = 5) -> float:
    """Mean ms per step, outside the profiler: CUDA events on a GPU, perf_counter on the CPU."""
    for _ in range(warmup):
        step()
    ctx.sync()
    if ctx.cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            step()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    return (time.perf_counter() - t0) * 1e3 / iters


def record(ctx: Ctx, name: str, variant: Variant) -> Path:
    s = variant.schedule
    n_steps = s.skip_first + s.wait + s.warmup + s.active
    path = ctx.out / f"{name}.json.gz"
    with profile(path, schedule=s, record_shapes=True) as prof:
        for _ in range(n_steps):
            variant.step()
            prof.step()
    ctx.sync()
    if not prof.paths:
        raise RuntimeError(f"{name}: no trace written")
    return prof.paths[0]


def mlp(width: int, layers: int, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), act()]
    return nn.Sequential(*mods)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> Step:
    def step() -> object:
        opt.zero_grad(set_to_none=True)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


# ---- pairs: each returns its (before, after) variants; build_*(ctx, after) ----------------


def tf32(ctx: Ctx, after: bool) -> Variant:
    set_tf32(after)
    torch.manual_seed(0)
    width, batch, layers = ctx.size(4096, 64), ctx.size(4096, 32), 6
    model = mlp(width, layers).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    x = torch.randn(batch, width, device=ctx.device)
    what = (
        'torch.set_float32_matmul_precision("high") (TF32 tensor cores)'
        if after
        else "fp32 matmuls without TF32 (allow_tf32=False)"
    )
    return Variant(train_step(model, opt, x), what)


def optimizer(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    # 40 small parameters: enough for a per-parameter optimizer to dominate, few enough kernels
    # (about 10 per parameter per step) for the trace to stay small.
    width, batch, layers = ctx.size(256, 16), ctx.size(32, 4), 20
    model = mlp(width, layers).to(ctx.device)
    params = list(model.parameters())
    if after:
        opt = torch.optim.AdamW(
            params, lr=1e-4, fused=ctx.cuda, foreach=None if ctx.cuda else False
        )
        what = "AdamW(fused=True): one fused kernel for all parameters"
    else:
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=False)
        what = "AdamW(foreach=False): ~10 kernels per parameter"
    x = torch.randn(batch, width, device=ctx.device)
    return Variant(train_step(model, opt, x), what)


def pinned(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    rows, width = ctx.size(65536, 64), 1024  # 256 MB of fp32 when full size
    model = nn.Linear(width, 256).to(ctx.device)
    host = torch.randn(rows, width)
    if after and ctx.cuda:
        host = host.pin_memory()

    @torch.no_grad()
    def step() -> object:
        x = host.to(ctx.device, non_blocking=after)
        return model(x).sum()

    what = (
        "input pinned once (pin_memory()), copied with non_blocking=True"
        if after
        else f"{rows * width * 4 / 2**20:.0f} MiB fp32 input copied from pageable memory each step"
    )
    return Variant(step, what)


def cpu_tensor(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    rows, width = ctx.size(8192, 64), 1024  # 32 MiB of fp32 per step when full size
    model = nn.Linear(width, width).to(ctx.device)
    where = ctx.device if after else torch.device("cpu")

    @torch.no_grad()
    def step() -> object:
        noise = torch.randn(rows, width, device=where)
        pos = torch.arange(rows * width, device=where, dtype=torch.float32).view(rows, width)
        x = (noise.to(ctx.device) + pos.to(ctx.device)) * 1e-6
        return model(x).sum()

    what = (
        'tensors created with device="cuda"'
        if after
        else "torch.randn / torch.arange on the CPU each step, then .to(cuda)"
    )
    return Variant(step, what)


ITEM_SYNC_SCHEDULE = Schedule(wait=1, warmup=2, active=4)
ITEM_SYNC_HOST_MS = 2.0
_ITEM_SYNC_BATCH: dict[bool, int] = {}


def _item_sync_model(ctx: Ctx, batch: int, after: bool) -> tuple[Step, str]:
    # Each micro-step: host work that needs no GPU (a sleep inside "next_micro_batch", standing
    # in for collating the next micro-batch), then fwd + bwd of 8 x (Linear(2048, 2048) + GELU),
    # ~70 kernels of real GPU work. Without a sync the host prepares the next micro-batch while
    # the GPU still runs this one; with loss.item() the GPU sits idle through it.
    width, layers, micro = ctx.size(2048, 32), 8, ctx.size(8, 3)
    torch.manual_seed(0)
    model = mlp(width, layers, nn.GELU).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    xs = torch.randn(micro, batch, width, device=ctx.device)

    def next_micro_batch(i: int) -> torch.Tensor:
        with torch.profiler.record_function("next_micro_batch"):
            time.sleep(ITEM_SYNC_HOST_MS / 1e3)
            return xs[i]

    def step() -> object:
        opt.zero_grad(set_to_none=True)
        if after:
            total = torch.zeros((), device=ctx.device)
            for i in range(micro):
                loss = model(next_micro_batch(i)).pow(2).mean()
                loss.backward()
                total += loss.detach()
            value = total.item() / micro  # one read per step
        else:
            value = 0.0
            for i in range(micro):
                loss = model(next_micro_batch(i)).pow(2).mean()
                loss.backward()
                value += loss.item() / micro  # the host waits for the GPU every micro-step
        opt.step()
        return value

    what = (
        f"batch {batch}: losses summed on the GPU, one .item() per step"
        if after
        else f"batch {batch}: loss.item() after each of {micro} micro-steps"
    )
    return step, what


def item_sync_batch(ctx: Ctx) -> int:
    """The batch at which the per-micro-step sync costs most (GPU time close to host time)."""
    if ctx.smoke:
        return 8
    best, best_saving = 4096, -1.0
    for batch in (1024, 2048, 4096, 8192):
        ms = {}
        for after in (False, True):
            step, _ = _item_sync_model(ctx, batch, after)
            ms[after] = time_step(ctx, step, warmup=2, iters=3)
            del step
        saving = (ms[False] - ms[True]) / ms[False]
        print(
            f"  item_sync probe batch {batch}: item() each micro-step {ms[False]:.2f} ms, "
            f"once per step {ms[True]:.2f} ms, saving {100 * saving:.1f} %",
            flush=True,
        )
        if saving > best_saving:
            best, best_saving = batch, saving
    ctx.sync()
    torch.cuda.empty_cache()
    return best


def item_sync(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    if ctx.smoke not in _ITEM_SYNC_BATCH:
        _ITEM_SYNC_BATCH[ctx.smoke] = item_sync_batch(ctx)
    step, what = _item_sync_model(ctx, _ITEM_SYNC_BATCH[ctx.smoke], after)
    return Variant(step, what, ITEM_SYNC_SCHEDULE)


def fp64(ctx: Ctx, after: bool) -> Variant:
    # The fix is "use float32": with the default-for-training precision "high" (TF32 matmuls).
    set_tf32(True)
    torch.manual_seed(0)
    width, batch, layers = ctx.size(4096, 32), ctx.size(4096, 16), 4
    dtype = torch.float32 if after else torch.float64
    model = mlp(width, layers, nn.GELU).to(ctx.device, dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=ctx.cuda)
    x = torch.randn(batch, width, device=ctx.device, dtype=dtype)
    what = "model and data in float32 (TF32 matmuls)" if after else "model and data in float64"
    return Variant(train_step(model, opt, x), what)


def misaligned_size(ctx: Ctx) -> int:
    """The aligned size (a multiple of 64) at which size-1 is slowest relative to it."""
    if ctx.smoke:
        return 64
    best, best_ratio = 8192, 0.0
    for n in (2048, 4096, 8192):
        ms = {}
        for m in (n - 1, n):
            a = torch.randn(m, m, device=ctx.device, dtype=torch.bfloat16)
            b = torch.randn(m, m, device=ctx.device, dtype=torch.bfloat16)
            c = torch.empty(m, m, device=ctx.device, dtype=torch.bfloat16)
            iters = max(5, int(20 * (8192 / n) ** 3))

            def gemms(a: torch.Tensor = a, b: torch.Tensor = b, c: torch.Tensor = c) -> None:
                torch.matmul(a, b, out=c)

            ms[m] = time_step(ctx, gemms, warmup=3, iters=iters)
        ratio = ms[n - 1] / ms[n]
        tflops = {m: 2 * m**3 / (t * 1e-3) / 1e12 for m, t in ms.items()}
        print(
            f"  misaligned probe n={n}: {n - 1}: {ms[n - 1]:.3f} ms ({tflops[n - 1]:.0f} TFLOP/s), "
            f"{n}: {ms[n]:.3f} ms ({tflops[n]:.0f} TFLOP/s), ratio {ratio:.2f}",
            flush=True,
        )
        if ratio > best_ratio:
            best, best_ratio = n, ratio
    return best


_MISALIGNED_N: dict[bool, int] = {}


def misaligned(ctx: Ctx, after: bool) -> Variant:
    if ctx.smoke not in _MISALIGNED_N:
        _MISALIGNED_N[ctx.smoke] = misaligned_size(ctx)
    n_aligned = _MISALIGNED_N[ctx.smoke]
    n = n_aligned if after else n_aligned - 1
    torch.manual_seed(0)
    a = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=ctx.device, dtype=torch.bfloat16)
    iters = ctx.size(100, 2)

    def step() -> object:
        for _ in range(iters):
            torch.matmul(a, b, out=c)
        return c

    return Variant(step, f"{iters} x bf16 GEMM M=N=K={n}")


def bmm(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    count, n = ctx.size(384, 16), 64
    a = torch.randn(count, n, n, device=ctx.device)
    b = torch.randn(count, n, n, device=ctx.device)
    out = torch.empty(count, n, n, device=ctx.device)

    def step() -> object:
        if after:
            torch.bmm(a, b, out=out)
        else:
            for i in range(count):
                torch.mm(a[i], b[i], out=out[i])
        return out

    what = (
        f"one torch.bmm over the stacked {count} x ({n}x{n} @ {n}x{n})"
        if after
        else f"{count} sequential torch.mm of {n}x{n} @ {n}x{n}"
    )
    return Variant(step, what)


def launch(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    width, batch, layers, calls = ctx.size(256, 32), 8, ctx.size(32, 4), 4
    model = mlp(width, layers).to(ctx.device).eval()
    x = torch.randn(batch, width, device=ctx.device)

    def forward(inp: torch.Tensor) -> torch.Tensor:
        return model(inp)

    fn: Callable[[torch.Tensor], torch.Tensor] = forward
    schedule = SCHEDULE
    if after:
        torch._dynamo.reset()
        if ctx.cuda:
            fn = torch.compile(forward, mode="reduce-overhead")
        else:  # the smoke run checks the Dynamo path without compiling C++
            fn = torch.compile(forward, backend="eager")
        # Compile and record the CUDA graph before the recorded steps: the first calls
        # compile, warm up and record; the active steps only replay.
        schedule = Schedule(wait=3, warmup=2, active=8)

    @torch.no_grad()
    def step() -> object:
        y = x
        for _ in range(calls):
            y = fn(x)
        return y.sum()

    what = (
        f'torch.compile(mode="reduce-overhead"): CUDA graph replay, {calls} calls per step'
        if after
        else f"eager: {layers} x (Linear({width},{width}) + ReLU), batch {batch}, {calls} calls per step"
    )
    return Variant(step, what, schedule)


def churn(ctx: Ctx, after: bool) -> Variant:
    set_tf32(True)
    torch.manual_seed(0)
    width, batch, layers = ctx.size(2048, 32), ctx.size(512, 8), 8
    model = mlp(width, layers).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.cuda)
    x = torch.randn(batch, width, device=ctx.device)
    inner = train_step(model, opt, x)

    def step() -> object:
        loss = inner()
        if not after and ctx.cuda:
            torch.cuda.empty_cache()  # frees the cached blocks: the next step cudaMallocs again
        return loss

    what = "caching allocator left alone" if after else "torch.cuda.empty_cache() every step"
    return Variant(step, what)


PAIRS: dict[str, Callable[[Ctx, bool], Variant]] = {
    "tf32": tf32,
    "optimizer": optimizer,
    "pinned": pinned,
    "cpu_tensor": cpu_tensor,
    "item_sync": item_sync,
    "fp64": fp64,
    "misaligned": misaligned,
    "bmm": bmm,
    "launch": launch,
    "churn": churn,
}


def describe(path: Path) -> str:
    from traceinsight.capture.merge import read_trace

    events = read_trace(path).get("traceEvents", [])
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    memcpy = sum(1 for e in events if e.get("cat") == "gpu_memcpy")
    steps = sum(
        1
        for e in events
        if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    )
    counters = sum(1 for e in events if e.get("ph") == "C")
    return f"kernels={kernels} memcpy={memcpy} steps={steps} counter_events={counters}"


def run_pair(ctx: Ctx, pair: str) -> dict[str, object]:
    row: dict[str, object] = {"pair": pair}
    for side in ("before", "after"):
        variant = PAIRS[pair](ctx, side == "after")
        t0 = time.perf_counter()
        ms = time_step(ctx, variant.step)
        path = record(ctx, f"fix_{pair}_{side}", variant)
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
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
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
    (args.out / "fix_timings.json").write_text(json.dumps(rows, indent=1) + "\n")
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
