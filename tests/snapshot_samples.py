"""The hand-made sample under ``sample_traces/memory/``: a training loop that leaks, fragments
and runs out of memory, with every figure known (``python -m tests.snapshot_samples`` writes it)."""

from __future__ import annotations

import sys
from pathlib import Path

from .snapshot_builder import MiB, SnapshotBuilder, stack

GiB = 1024 * MiB
SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "sample_traces"
    / "memory"
    / "handmade_train_oom.pickle"
)
STEPS = 10
WEIGHTS_BYTES = 1280 * MiB  # model.py:14, in 5 tensors of 256 MiB
# model.py:31 (forward), 4 per step, freed after the step; 2 in the last
ACTIVATION_BYTES = 384 * MiB
LEAK_BYTES = 48 * MiB  # train.py:57 keeps each step's logits in a list
OOM_REQUEST_BYTES = 2560 * MiB
OOM_DEVICE_FREE_BYTES = 512 * MiB


def build() -> SnapshotBuilder:
    b = SnapshotBuilder(step_us=250)
    b.segment(2 * GiB)
    for _ in range(5):
        b.alloc(WEIGHTS_BYTES // 5, stack("/home/user/model.py", 14, "__init__"), segment=0)
    b.segment(4 * GiB)
    for _ in range(STEPS):
        acts = [
            b.alloc(
                ACTIVATION_BYTES, stack("/home/user/model.py", 31, "block", forward=True), segment=1
            )
            for _ in range(4)
        ]
        b.alloc(LEAK_BYTES, stack("/home/user/train.py", 57, "train_step"), segment=1)
        for addr in acts:
            b.free(addr)
    # The next step runs out of memory in its forward, two activations in.
    for _ in range(2):
        b.alloc(
            ACTIVATION_BYTES, stack("/home/user/model.py", 31, "block", forward=True), segment=1
        )
    b.oom(OOM_REQUEST_BYTES, OOM_DEVICE_FREE_BYTES)
    return b


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE
    target.parent.mkdir(parents=True, exist_ok=True)
    build().dump(target, protocol=4)
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")
