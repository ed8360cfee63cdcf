"""Cross-check the cost model's FLOPs against ``torch.utils.flop_counter`` on real op calls.

Runs a set of ops (mm, addmm, bmm, linear, conv2d, sdpa) once under ``FlopCounterMode`` and
once under ``torch.profiler`` with ``record_shapes=True``, loads the exported trace with
``traceinsight.load`` and compares the FLOPs the cost model derives from each recorded op
with flop_counter's count for the same call. CPU is enough (FLOPs do not depend on the
device):

    python benchmarks/flop_crosscheck.py [--device cuda]

A ratio of 1.000 means both agree. Causal attention reads 0.5 by design: the cost model
halves the work a causal mask skips, flop_counter does not.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl

import traceinsight
from traceinsight.analysis.costmodel import op_costs


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
    ]


def counted_flops(fn: Callable[[], object], op_name: str) -> int:
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
    rows = costs.filter(pl.col("name").cast(pl.String) == op_name).sort("depth")
    return float(rows["flops"][0]) if rows.height else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__}, device {args.device}")
    print(f"{'case':<38} {'op':<36} {'flop_counter':>14} {'traceinsight':>14} {'ratio':>7}")
    worst = 0.0
    for label, op_name, fn in cases(args.device):
        fn()  # warm up so the profiled call is a plain one
        expected = counted_flops(fn, op_name)
        ours = traced_flops(fn, op_name, args.device)
        ratio = (ours / expected) if ours is not None and expected else None
        shown = f"{ratio:.3f}" if ratio is not None else "-"
        print(f"{label:<38} {op_name:<36} {expected:>14,} {(ours or 0):>14,.0f} {shown:>7}")
        if ratio is not None and "causal" not in label:
            worst = max(worst, abs(ratio - 1.0))
    print(f"largest deviation from flop_counter (non-causal cases): {worst:.3%}")
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())
