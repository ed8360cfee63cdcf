"""Re-time before/after pairs with the variants interleaved: ``rounds`` rounds, each timing before
then after (``--iters`` steps after 3 warm-up, CUDA events, ``cuda_timing.time_step``), so that
drift of the host (clocks, other load) hits both sides alike. Prints each round and the mean
and spread.

A pair is ``FAMILY:NAME``: ``models`` (make_model_pairs.py; the default when no family is
given), ``causes`` (make_cause_pairs.py), ``fix`` (make_findings_pairs.py). Pairs whose sides set
a process-wide switch when built (TF32) cannot be interleaved and are not offered.

    python3 sample_traces/retime_pairs.py --only zero_grad,channels_last --rounds 6
    python3 sample_traces/retime_pairs.py --only causes:alloc,fix:churn --rounds 8 --out t.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces.cuda_timing import time_step
from sample_traces.make_model_pairs import PAIRS

Step = Callable[[], object]
# Sides that set a process-wide switch when they are built (the last one built would win).
GLOBAL_SWITCH = {"fix:tf32"}


def sides(pair: str, dev: torch.device) -> dict[str, Step]:
    """The before and after step functions of ``pair`` (``FAMILY:NAME``)."""
    family, _, name = pair.rpartition(":")
    if pair in GLOBAL_SWITCH:
        raise SystemExit(f"{pair}: its sides set a process-wide switch; time it with its recording script")
    if family in ("", "models"):
        return {side: PAIRS[name](dev, False, side == "after")[0] for side in ("before", "after")}
    if family == "causes":
        from sample_traces import make_cause_pairs as causes

        ctx = causes.Ctx(Path("."), False, dev)
        return {side: causes.PAIRS[name](ctx, side == "after").step for side in ("before", "after")}
    if family == "fix":
        from sample_traces import make_findings_pairs as fixes

        fctx = fixes.Ctx(Path("."), False, dev)
        return {side: fixes.PAIRS[name](fctx, side == "after").step for side in ("before", "after")}
    raise SystemExit(f"{pair}: unknown family {family!r} (models, causes, fix)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="zero_grad,channels_last")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=10, help="timed steps per side and round")
    ap.add_argument("--out", type=Path, default=None, help="write the table as JSON here")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    dev = torch.device("cuda")
    rows = []
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        steps = sides(name, dev)
        ms: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for side in ("before", "after"):
                ms[side].append(time_step(steps[side], True, iters=args.iters))
            print(f"{name} round {r}: before {ms['before'][-1]:.3f} after {ms['after'][-1]:.3f} ms/step", flush=True)
        b, a = statistics.mean(ms["before"]), statistics.mean(ms["after"])
        row = {"pair": name, "rounds": args.rounds, "iters": args.iters, "before_ms": round(b, 3), "after_ms": round(a, 3),
               "before_sd_ms": round(statistics.stdev(ms["before"]), 3), "after_sd_ms": round(statistics.stdev(ms["after"]), 3),
               "saving_pct": round(100 * (b - a) / b, 1)}
        rows.append(row)
        print(row, flush=True)
        del steps
        torch.cuda.empty_cache()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
