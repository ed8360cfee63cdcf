"""Record the sample traces with traceinsight.capture.profile (NVML/GPM counters included).

On a CUDA machine:   python3 sample_traces/make_samples.py --out sample_traces
On a CPU-only one:   python3 sample_traces/make_samples.py --smoke --out /tmp/samples
(``--smoke`` shrinks every size so the script itself can be checked without a GPU; those traces
are not the published samples.) ``--only a,b`` records just those scenarios.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from traceinsight.capture import Schedule, profile

MAX_BYTES = int(os.environ.get("SAMPLE_MAX_BYTES", "1000000"))


@dataclass
class Ctx:
    out: Path
    smoke: bool
    device: torch.device

    def size(self, full: int, smoke: int) -> int:
        return smoke if self.smoke else full

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()


def run_schedule(
    ctx: Ctx,
    name: str,
    step_fn: Callable[[int], object],
    schedule: Schedule,
    **profile_kw: object,
) -> Path:
    """Call ``step_fn`` once per step under profile(); the schedule decides what is recorded."""
    n_steps = schedule.skip_first + schedule.wait + schedule.warmup + schedule.active
    path = ctx.out / f"{name}.json.gz"
    with profile(path, schedule=schedule, **profile_kw) as prof:  # type: ignore[arg-type]
        for i in range(n_steps):
            step_fn(i)
            prof.step()
    ctx.sync()
    if not prof.paths:
        raise RuntimeError(f"{name}: no trace written")
    return prof.paths[0]


# ---- models -------------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.attn = nn.TransformerEncoderLayer(
            d, nhead=4, dim_feedforward=4 * d, batch_first=True, dropout=0.0
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x)


class TinyTransformer(nn.Module):
    def __init__(self, d: int, layers: int, vocab: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.emb(tokens)))


def make_train_step(
    ctx: Ctx, compile_mode: str | None = None, layers: int | None = None
) -> Callable[[int], object]:
    torch.manual_seed(0)
    d, vocab = ctx.size(512, 32), ctx.size(8192, 64)
    layers = layers if layers is not None else ctx.size(2, 1)
    batch, seq = ctx.size(32, 2), ctx.size(256, 8)
    model = TinyTransformer(d, layers, vocab).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    tokens = torch.randint(0, vocab, (batch, seq), device=ctx.device)
    targets = torch.randint(0, vocab, (batch, seq), device=ctx.device)

    def fwd_bwd() -> torch.Tensor:
        logits = model(tokens)
        loss = loss_fn(logits.view(-1, vocab), targets.view(-1))
        loss.backward()
        return loss

    fn = torch.compile(fwd_bwd, mode=compile_mode) if compile_mode is not None else fwd_bwd

    def step(_: int) -> object:
        opt.zero_grad(set_to_none=True)
        loss = fn()
        opt.step()
        return loss

    return step


# ---- scenarios ----------------------------------------------------------------------------


def train_eager(ctx: Ctx) -> list[Path]:
    step = make_train_step(ctx)
    return [
        run_schedule(
            ctx,
            "train_eager",
            step,
            Schedule(wait=1, warmup=1, active=5),
            profile_memory=True,
        )
    ]


def train_with_stack(ctx: Ctx) -> list[Path]:
    step = make_train_step(ctx)
    return [
        run_schedule(
            ctx, "train_with_stack", step, Schedule(wait=1, warmup=1, active=2), with_stack=True
        )
    ]


def train_compiled(ctx: Ctx) -> list[Path]:
    out = []
    # First a trace whose active window holds the first call (the compile itself): one layer,
    # two steps and no shapes, since tracing during compilation alone writes many events. A
    # cold compile also benchmarks Triton configs (thousands of kernels); if that makes the
    # trace too big, it is recorded again now that Inductor's cache is warm, so the window
    # holds Dynamo tracing, AOT autograd and the cache lookups of a first call.
    for attempt in ("cold", "warm"):
        torch._dynamo.reset()
        step = make_train_step(ctx, compile_mode="default", layers=1)
        first = run_schedule(
            ctx,
            "train_compiled_with_compile",
            step,
            Schedule(wait=0, warmup=0, active=2),
            record_shapes=False,
        )
        size = first.stat().st_size
        if size <= MAX_BYTES:
            print(f"  {first.name}: {attempt} Inductor cache", flush=True)
            out.append(first)
            break
        print(f"  {first.name} ({attempt} cache) is {size} bytes > {MAX_BYTES}", flush=True)
        print(f"  {describe(first)}", flush=True)
        print(f"  most frequent events: {top_events(first)}", flush=True)
        first.unlink()
    # Then a fresh model, compiled during the wait steps, with only compiled steps active.
    torch._dynamo.reset()
    step = make_train_step(ctx, compile_mode="default")
    out.append(run_schedule(ctx, "train_compiled", step, Schedule(wait=2, warmup=1, active=5)))
    return out


def train_cudagraphs(ctx: Ctx) -> list[Path]:
    torch._dynamo.reset()
    step = make_train_step(ctx, compile_mode="reduce-overhead")
    return [run_schedule(ctx, "train_cudagraphs", step, Schedule(wait=3, warmup=1, active=5))]


class CpuHeavyDataset(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Each item costs a few ms of CPU (an FFT and a sort over random data)."""

    def __init__(self, n: int, dim: int, work: int) -> None:
        self.n, self.dim, self.work = n, dim, work

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng(i)
        x = rng.standard_normal(self.work)
        for _ in range(3):
            x = np.sort(np.abs(np.fft.rfft(x, n=self.work)))[: self.work // 2].repeat(2)
        feat = np.resize(x.astype(np.float32), self.dim)
        return torch.from_numpy(feat), torch.tensor(i % 10)


def _dataloader(ctx: Ctx, workers: int) -> list[Path]:
    torch.manual_seed(0)
    dim = ctx.size(512, 16)
    ds = CpuHeavyDataset(n=10_000, dim=dim, work=ctx.size(200_000, 1000))
    loader = torch.utils.data.DataLoader(
        ds,
        batch_size=ctx.size(16, 4),
        num_workers=workers,
        pin_memory=ctx.device.type == "cuda",
        shuffle=False,
        persistent_workers=workers > 0,
    )
    model = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 10)).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters())
    it = iter(loader)

    def step(_: int) -> object:
        x, y = next(it)
        x = x.to(ctx.device, non_blocking=True)
        y = y.to(ctx.device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    name = f"dataloader_w{workers}"
    # The wait steps drain the batches the workers prefetched while starting, so the active
    # steps show the steady state (workers * prefetch_factor = 8 batches for w4).
    return [run_schedule(ctx, name, step, Schedule(wait=10, warmup=1, active=10))]


def dataloader_w0(ctx: Ctx) -> list[Path]:
    return _dataloader(ctx, 0)


def dataloader_w4(ctx: Ctx) -> list[Path]:
    return _dataloader(ctx, 4)


def tiny_kernels(ctx: Ctx) -> list[Path]:
    n = 64
    a = torch.randn(n, n, device=ctx.device)
    b = torch.randn(n, n, device=ctx.device)
    iters = ctx.size(300, 10)

    def step(_: int) -> object:
        x = a
        for _ in range(iters):
            x = torch.matmul(x, b)
            x = x * 0.5
            x = x + a
        return x

    return [run_schedule(ctx, "tiny_kernels", step, Schedule(wait=1, warmup=1, active=3))]


def gemm_bf16(ctx: Ctx) -> list[Path]:
    n = ctx.size(8192, 128)
    a = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=ctx.device, dtype=torch.bfloat16)
    iters = ctx.size(100, 2)

    def step(_: int) -> object:
        for _ in range(iters):
            torch.matmul(a, b, out=c)
        return c

    return [run_schedule(ctx, "gemm_bf16", step, Schedule(wait=1, warmup=1, active=5))]


def elementwise(ctx: Ctx) -> list[Path]:
    numel = ctx.size(256 * 1024 * 1024, 1024)  # 1 GiB of fp32
    a = torch.randn(numel, device=ctx.device)
    b = torch.randn(numel, device=ctx.device)
    c = torch.empty_like(a)
    iters = ctx.size(100, 2)

    def step(_: int) -> object:
        for _ in range(iters):
            torch.add(a, b, out=c)
            torch.mul(c, a, out=c)
            torch.relu_(c)
        return c

    return [run_schedule(ctx, "elementwise", step, Schedule(wait=1, warmup=1, active=4))]


def regimes(ctx: Ctx) -> list[Path]:
    rf = torch.profiler.record_function
    small_a = torch.randn(32, 32, device=ctx.device)
    small_b = torch.randn(32, 32, device=ctx.device)
    n = ctx.size(8192, 128)
    ga = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    gb = torch.randn(n, n, device=ctx.device, dtype=torch.bfloat16)
    gc = torch.empty(n, n, device=ctx.device, dtype=torch.bfloat16)
    numel = ctx.size(256 * 1024 * 1024, 1024)
    ea = torch.randn(numel, device=ctx.device)
    eb = torch.randn(numel, device=ctx.device)
    ec = torch.empty_like(ea)
    s = torch.zeros((), device=ctx.device)
    # Sized so each region lasts >= ~20 ms on an H100/H200 while the trace stays < 1 MB.
    tiny_iters = ctx.size(1200, 20)
    gemm_iters = ctx.size(150, 2)
    elem_iters = ctx.size(60, 2)
    sync_iters = ctx.size(800, 10)
    sleep_s = ctx.size(4, 1)

    def step(_: int) -> object:
        with rf("tiny_matmuls"):
            x = small_a
            for _ in range(tiny_iters):
                x = torch.matmul(x, small_b)
            ctx.sync()
        with rf("big_gemm_bf16"):
            for _ in range(gemm_iters):
                torch.matmul(ga, gb, out=gc)
            ctx.sync()
        with rf("elementwise_gb"):
            for _ in range(elem_iters):
                torch.add(ea, eb, out=ec)
                torch.mul(ec, ea, out=ec)
                torch.relu_(ec)
            ctx.sync()
        with rf("host_sleep"):
            # Several 50 ms sleeps so at least one NVML sample sees the idle GPU.
            for _ in range(sleep_s):
                time.sleep(0.05)
        with rf("item_sync"):
            total = 0.0
            for _ in range(sync_iters):
                total += float((s + 1.0).item())
        return total

    return [run_schedule(ctx, "regimes", step, Schedule(wait=1, warmup=1, active=2))]


def _mm_sweep(ctx: Ctx, n_full: int) -> list[Path]:
    n = n_full if not ctx.smoke else max(8, n_full // 64)
    dtype = torch.bfloat16
    a = torch.randn(n, n, device=ctx.device, dtype=dtype)
    b = torch.randn(n, n, device=ctx.device, dtype=dtype)
    bias = torch.randn(n, device=ctx.device, dtype=dtype)
    iters = ctx.size(600, 5)

    def step(_: int) -> object:
        c = a
        for _ in range(iters):
            c = a @ b + bias
        return c

    name = f"mm_sweep_{n_full}"
    return [run_schedule(ctx, name, step, Schedule(wait=1, warmup=1, active=3))]


def _amp(ctx: Ctx, on: bool) -> list[Path]:
    torch.manual_seed(0)
    hidden, batch, layers = ctx.size(4096, 32), ctx.size(8192, 16), ctx.size(8, 2)
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden), nn.GELU()]
    model = nn.Sequential(*mods, nn.Linear(hidden, 10)).to(ctx.device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, hidden, device=ctx.device)
    y = torch.randint(0, 10, (batch,), device=ctx.device)
    amp_dtype = torch.bfloat16

    def step(_: int) -> object:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=ctx.device.type, dtype=amp_dtype, enabled=on):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    name = "amp_on" if on else "amp_off"
    return [run_schedule(ctx, name, step, Schedule(wait=1, warmup=1, active=5))]


def describe(path: Path) -> str:
    """One line: kernels, ProfilerSteps, counter events by family, capture status."""
    from traceinsight.capture.merge import read_trace

    trace = read_trace(path)
    events = trace.get("traceEvents", [])
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    steps = sorted(
        {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    )
    fams: dict[str, int] = {}
    for e in events:
        if e.get("ph") == "C":
            fams[e["name"]] = fams.get(e["name"], 0) + 1
    cap = trace.get("traceinsight", {}).get("capture", {})
    return (
        f"kernels={kernels} steps={steps} counters={fams} "
        f"nvml={cap.get('nvml')!r} gpm={cap.get('gpm')!r}"
    )


def top_events(path: Path, n: int = 8) -> list[tuple[str, int]]:
    from collections import Counter

    from traceinsight.capture.merge import read_trace

    events = read_trace(path).get("traceEvents", [])
    return Counter(f"{e.get('cat')}:{str(e.get('name'))[:40]}" for e in events).most_common(n)


SCENARIOS: dict[str, Callable[[Ctx], list[Path]]] = {
    "train_eager": train_eager,
    "train_with_stack": train_with_stack,
    "tiny_kernels": tiny_kernels,
    "gemm_bf16": gemm_bf16,
    "elementwise": elementwise,
    "regimes": regimes,
    "mm_sweep_64": lambda c: _mm_sweep(c, 64),
    "mm_sweep_256": lambda c: _mm_sweep(c, 256),
    "mm_sweep_1024": lambda c: _mm_sweep(c, 1024),
    "mm_sweep_4096": lambda c: _mm_sweep(c, 4096),
    "amp_off": lambda c: _amp(c, False),
    "amp_on": lambda c: _amp(c, True),
    "dataloader_w0": dataloader_w0,
    "dataloader_w4": dataloader_w4,
    "train_compiled": train_compiled,
    "train_cudagraphs": train_cudagraphs,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; runs on CPU")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        ap.error("no CUDA device: use --smoke to check the script on CPU")
    device = torch.device("cuda" if cuda else "cpu")
    ctx = Ctx(out=args.out, smoke=args.smoke, device=device)
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"torch {torch.__version__}, device "
        f"{torch.cuda.get_device_name() if cuda else 'cpu'}, smoke={args.smoke}",
        flush=True,
    )
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            paths = SCENARIOS[name](ctx)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            continue
        finally:
            if cuda:
                torch.cuda.empty_cache()
        for p in paths:
            size = p.stat().st_size
            flag = "  TOO BIG" if size > MAX_BYTES else ""
            print(
                f"{name}: {p.name} {size} bytes in {time.perf_counter() - t0:.1f} s{flag}",
                flush=True,
            )
            print(f"  {describe(p)}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
