"""Cross-check the cost model's FLOPs against ``torch.utils.flop_counter`` on real op calls.

Runs a set of ops (mm, addmm, bmm, linear, conv2d, sdpa) once under ``FlopCounterMode`` and
once under ``torch.profiler`` with ``record_shapes=True``, loads the exported trace with
``traceinsight.load`` and compares the FLOPs the cost model derives from each recorded op
with flop_counter's count for the same call. CPU is enough (FLOPs do not depend on the
device):

    python benchmarks/flop_crosscheck.py [--device cuda]

A ratio of 1.000 means both agree. Causal attention reads 0.5 by design: the cost model
halves the work a causal mask skips, flop_counter does not. Attention backward is compared
with flop_counter's formula for the fused backward kernels (``sdpa_backward_flop_count``:
five matmuls, 2.5× the forward, as QKᵀ is recomputed), which is what the cost model counts;
the cross-attention cases check that the key length (not the query length) sizes the work.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

import traceinsight
from traceinsight.analysis.cost.model import op_costs

# Recorded names of the fused attention backward (CPU flash, CUDA flash/efficient/cuDNN).
ATTENTION_BACKWARD = (
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
)
ATTENTION_BACKWARD_OP = "sdpa backward"


def cases(device: str) -> list[tuple[str, str, Callable[[], object]]]:
    """(label, aten op the profiler records, call) for each checked case."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(device)

    a, b = r(256, 512), r(512, 128)
    bias = r(128)
    x3, y3 = r(8, 64, 32), r(8, 32, 48)
    lin_x, lin_w, lin_b = r(4, 16, 256), r(512, 256), r(512)
    img, w = r(2, 8, 32, 32), r(16, 4, 3, 3)
    img1, w1 = r(4, 3, 64, 64), r(32, 3, 7, 7)
    q, k, v = r(2, 4, 128, 64), r(2, 4, 128, 64), r(2, 4, 128, 64)
    k_long, v_long = r(2, 4, 256, 64), r(2, 4, 256, 64)  # cross-attention: 256 keys for 128 queries

    def backward(keys: int) -> Callable[[], object]:
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, r(2, 4, keys, 64), r(2, 4, keys, 64)))

        def call() -> object:
            out = F.scaled_dot_product_attention(qg, kg, vg)
            out.backward(torch.ones_like(out))
            return out

        return call

    return [
        ("mm 256x512 @ 512x128", "aten::mm", lambda: torch.mm(a, b)),
        ("addmm bias + 256x512 @ 512x128", "aten::addmm", lambda: torch.addmm(bias, a, b)),
        ("bmm 8x64x32 @ 8x32x48", "aten::bmm", lambda: torch.bmm(x3, y3)),
        ("linear [4,16,256] -> 512", "aten::linear", lambda: F.linear(lin_x, lin_w, lin_b)),
        ("conv2d 3x3 stride 2 pad 1 groups 2", "aten::conv2d", lambda: F.conv2d(img, w, stride=2, padding=1, groups=2)),
        ("conv2d 7x7 stride 2 pad 3", "aten::conv2d", lambda: F.conv2d(img1, w1, stride=2, padding=3)),
        ("sdpa [2,4,128,64]", "aten::scaled_dot_product_attention", lambda: F.scaled_dot_product_attention(q, k, v)),
        (
            "sdpa [2,4,128,64] causal",
            "aten::scaled_dot_product_attention",
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        ),
        (
            "sdpa cross q128 k256",
            "aten::scaled_dot_product_attention",
            lambda: F.scaled_dot_product_attention(q, k_long, v_long),
        ),
        ("sdpa backward [2,4,128,64]", ATTENTION_BACKWARD_OP, backward(128)),
        ("sdpa backward cross q128 k256", ATTENTION_BACKWARD_OP, backward(256)),
    ]


def counted_flops(fn: Callable[[], object], op_name: str) -> int:
    if op_name == ATTENTION_BACKWARD_OP:
        # The math backend's backward is four batched matmuls (2× forward); the fused kernels
        # the profiler records recompute QKᵀ, which flop_counter's fused-backward formula counts.
        shapes: list[tuple[int, ...]] = []
        orig = F.scaled_dot_product_attention

        def spy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *a: object, **kw: object) -> torch.Tensor:
            shapes.extend([tuple(q.shape), tuple(k.shape), tuple(v.shape)])
            return orig(q, k, v, *a, **kw)  # type: ignore[arg-type]

        F.scaled_dot_product_attention = spy
        try:
            fn()
        finally:
            F.scaled_dot_product_attention = orig
        q_shape, k_shape, v_shape = shapes[:3]
        out_shape = (*q_shape[:-1], v_shape[-1])
        return int(sdpa_backward_flop_count(out_shape, q_shape, k_shape, v_shape))
    if op_name.endswith("scaled_dot_product_attention"):
        # flop_counter has no formula for the CPU flash kernel; the math backend decomposes
        # attention into the two batched matmuls it does count.
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            fn()
        return int(counter.get_total_flops())
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def traced_flops(fn: Callable[[], object], op_name: str, device: str) -> float | None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            fn()
        prof.export_chrome_trace(str(path))
        trace = traceinsight.load(path, cache=False)
    costs = op_costs(trace.events).join(trace.events.select("id", "name", "depth"), on="id")
    # The outermost call of the op is the one the user made.
    names = list(ATTENTION_BACKWARD) if op_name == ATTENTION_BACKWARD_OP else [op_name]
    rows = costs.filter(pl.col("name").cast(pl.String).is_in(names)).sort("depth")
    return float(rows["flops"][0]) if rows.height else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__}, device {args.device}")
    print(f"{'case':<38} {'op':<36} {'flop_counter':>14} {'traceinsight':>14} {'ratio':>7}", flush=True)
    worst = 0.0
    for label, op_name, fn in cases(args.device):
        fn()  # warm up so the profiled call is a plain one
        expected = counted_flops(fn, op_name)
        ours = traced_flops(fn, op_name, args.device)
        ratio = (ours / expected) if ours is not None and expected else None
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        print(f"{label:<38} {op_name:<36} {expected:>14,} {(ours or 0):>14,.0f} {shown:>7}", flush=True)
        if ratio is not None and "causal" not in label:
            worst = max(worst, abs(ratio - 1.0))
    print(f"largest deviation from flop_counter (non-causal cases): {worst:.3%}")
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
