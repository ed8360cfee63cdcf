"""What the sync of boolean indexing in a loss costs without the profiler, taken apart.

BERT-base (6 layers) token classification, the boolmask pair of ``make_cause_pairs.py``, in
five variants timed with CUDA events in interleaved rounds (``--rounds`` of 20 steps each):
``before`` (``logits[mask]``: a nonzero that waits for the GPU), ``after`` (labels set to -100,
``ignore_index``), ``after_sync`` (after, with ``torch.cuda.synchronize()`` where the nonzero
waited), ``after_wait`` (after, the host polling an event there instead of blocking) and
``index_nosync`` (the same gather with indices computed once, outside the step). The host's
phases (forward, loss, backward, optimizer) are timed with ``perf_counter`` in the last round.

    python3 sample_traces/probe_sync_cost.py --out probe.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sample_traces import make_cause_pairs as causes
from sample_traces.cuda_timing import time_step

KINDS = ("before", "after", "after_sync", "after_wait", "index_nosync")
N_LABELS = 9


def variants(dev: torch.device) -> dict[str, tuple[Callable[[], object], dict[str, list[float]]]]:
    from transformers import BertForTokenClassification

    ctx = causes.Ctx(Path("."), False, dev)
    torch.manual_seed(0)
    model = BertForTokenClassification(causes.bert_config(ctx, 6, num_labels=N_LABELS)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    batch, seq = 16, 128
    ids = torch.randint(0, 30522, (batch, seq), device=dev)
    lengths = torch.randint(seq // 4, seq + 1, (batch, 1), device=dev)
    mask = (torch.arange(seq, device=dev)[None, :] < lengths).long()
    labels = torch.randint(0, N_LABELS, (batch, seq), device=dev)
    ignored = labels.masked_fill(mask == 0, -100).view(-1)
    active_idx = (mask.view(-1) == 1).nonzero().squeeze(1)

    def make(kind: str) -> tuple[Callable[[], object], dict[str, list[float]]]:
        phases: dict[str, list[float]] = {"fwd": [], "loss": [], "bwd": [], "opt": []}

        def step() -> object:
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=ids, attention_mask=mask).logits
            t1 = time.perf_counter()
            flat = logits.float().view(-1, N_LABELS)
            if kind == "before":
                active = mask.view(-1) == 1
                loss = F.cross_entropy(flat[active], labels.view(-1)[active])
            elif kind == "index_nosync":
                loss = F.cross_entropy(flat.index_select(0, active_idx), labels.view(-1).index_select(0, active_idx))
            else:
                loss = F.cross_entropy(flat, ignored, ignore_index=-100)
            if kind == "after_sync":
                torch.cuda.synchronize()
            elif kind == "after_wait":
                done = torch.cuda.Event()
                done.record()
                while not done.query():
                    pass
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            opt.step()
            t4 = time.perf_counter()
            for name, a, b in (("fwd", t0, t1), ("loss", t1, t2), ("bwd", t2, t3), ("opt", t3, t4)):
                phases[name].append((b - a) * 1e3)
            return loss

        return step, phases

    return {k: make(k) for k in KINDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    steps = variants(torch.device("cuda"))
    ms: dict[str, list[float]] = {k: [] for k in KINDS}
    for r in range(args.rounds):
        for k in KINDS:
            for v in steps[k][1].values():
                v.clear()
            ms[k].append(time_step(steps[k][0], True, iters=args.iters))
        print("round", r, {k: round(v[-1], 2) for k, v in ms.items()}, flush=True)
    out = {
        k: {"ms": round(statistics.mean(ms[k]), 3), "sd": round(statistics.stdev(ms[k]), 3),
            "host_phases_ms_median_last_round": {p: round(statistics.median(v), 3) for p, v in steps[k][1].items()}}
        for k in KINDS
    }
    for k, row in out.items():
        print(k, row, flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
