"""What the caching allocator would have reserved under other settings, and which to use.

The recorded requests are replayed (``allocator.py``) under the settings the snapshot says
were in force, and the result is checked against the reserved memory the snapshot recorded:
``replay_error`` says how far the replay is from the truth on this very trace, so the
predictions for the other settings can be weighed. The alternatives are expandable segments
(on or off) and ``max_split_size_mb`` at a few sizes; the advice is the one predicted to
reserve the least at the peak, when it saves at least ``MIN_SAVING`` of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import polars as pl

from traceinsight.analysis.core.base import Result
from traceinsight.analysis.snapshot.allocator import (
    SMALL_BUFFER_BYTES,
    AllocatorSettings,
    SimulatedRun,
    allocation_size,
    round_size,
)
from traceinsight.analysis.snapshot.allocator_runs import Trace, ints, simulate, simulate_each
from traceinsight.analysis.snapshot.replay import DeviceReplay, device_events
from traceinsight.analysis.snapshot.units import fmt_bytes
from traceinsight.trace.snapshot.model import MemorySnapshot

MIN_SAVING = 0.05
# A replay further than this from the recorded reserved memory does not follow the trace (a
# hand-made snapshot, a history cut short, a private pool): its predictions are withheld.
MAX_REPLAY_ERROR = 0.10
MAX_SPLIT_CHOICES_MB = (64, 256, 1024)


@dataclass(frozen=True)
class WhatIfResult(Result):
    """``runs``: one row per setting (``recorded`` first) with its predicted peak reserved
    memory and ``cudaMalloc`` count; ``recorded_peak_reserved_bytes`` is the snapshot's own."""

    name: ClassVar[str] = "memory_allocator_whatif"
    device: int = 0
    recorded_settings: str = ""
    recorded_peak_reserved_bytes: int = 0
    replayed_peak_reserved_bytes: int = 0
    replay_error: float = 0.0  # replayed / recorded - 1, on the recorded settings
    runs: pl.DataFrame | None = None
    best_settings: str = ""
    best_saving_bytes: int = 0
    limit_bytes: int = 0  # the limit replayed under (from the OOM); 0: none
    advice: str = ""

    def to_polars(self) -> pl.DataFrame:
        return self.runs if self.runs is not None else pl.DataFrame()


def recorded_settings(settings: dict[str, Any], expandable: bool) -> AllocatorSettings:
    """The settings in force, from the snapshot's ``allocator_settings`` (PyTorch 2.5 and
    later write them; older snapshots count as the defaults)."""
    split = settings.get("max_split_size")
    threshold = settings.get("garbage_collection_threshold")
    return AllocatorSettings(
        expandable_segments=expandable,
        max_split_bytes=int(split) if isinstance(split, int) and 0 < split < 1 << 62 else None,
        garbage_collection_threshold=float(threshold) if threshold else None,
    )


def requests(snapshot: MemorySnapshot, replay: DeviceReplay) -> Trace:
    """The trace as the allocator saw it: blocks held before it began first (as requests at
    its start), then each ``alloc`` (1) and ``free_completed`` (0) in order. Machine ints
    (``array``), not lists: a list holds an int object per value, several times the memory
    on a trace of millions of requests, and the replay is where the answers peak."""
    before = replay.allocations.filter(pl.col("alloc_idx") < 0)
    events = device_events(snapshot.events, replay.device).filter(
        pl.col("action").is_in(["alloc", "free_completed", "oom"])
    )
    code = pl.col("action").replace_strict({"alloc": 1, "free_completed": 0, "oom": 2})
    columns = pl.concat(
        [
            before.select(
                pl.lit(1, pl.Int64).alias("action"),
                pl.col("addr").fill_null(0),
                pl.col("size_bytes").fill_null(0),
                pl.lit(0, pl.Int64).alias("stream"),
            ),
            events.select(
                code.cast(pl.Int64).alias("action"),
                pl.col("addr").fill_null(0),
                pl.col("size_bytes").fill_null(0),
                pl.col("stream").fill_null(0),
            ),
        ]
    )
    actions, addrs, sizes, streams = (ints(columns[name].to_numpy()) for name in columns.columns)
    return actions, addrs, sizes, streams


def start_state(
    snapshot: MemorySnapshot, replay: DeviceReplay
) -> tuple[list[tuple[int, int, int, bool]], list[tuple[int, int]]] | None:
    """The segments reserved before the trace began and the blocks held in them then, when
    the trace starts in the middle of a run (a history cut short by ``max_entries``): the
    snapshot's segments that the trace does not reserve, and those it gives back without
    having reserved them. None when there were none (the whole history), or with expandable
    segments, whose pages this does not rebuild."""
    device = replay.device
    segments = snapshot.segments.filter(pl.col("device") == device)
    if segments.is_empty() or bool(segments["is_expandable"].any()):
        return None
    events = device_events(snapshot.events, device).filter(
        pl.col("action").is_in(["segment_alloc", "segment_free", "segment_map", "segment_unmap"])
    )
    if not events.filter(pl.col("action").is_in(["segment_map", "segment_unmap"])).is_empty():
        return None
    made = set(events.filter(pl.col("action") == "segment_alloc")["addr"].to_list())
    start = [
        (
            int(r["address"]),
            int(r["total_size_bytes"]),
            int(r["stream"] or 0),
            r["segment_type"] == "small",
        )
        for r in segments.iter_rows(named=True)
        if r["address"] not in made
    ]
    seen: set[int] = set()
    for r in events.iter_rows(named=True):
        addr = int(r["addr"] or 0)
        if r["action"] == "segment_alloc":
            seen.add(addr)
        elif addr not in seen:  # freed in the trace, reserved before it
            size = int(r["size_bytes"] or 0)
            start.append((addr, size, int(r["stream"] or 0), size <= SMALL_BUFFER_BYTES))
    if not start:
        return None
    before = replay.allocations.filter(pl.col("alloc_idx") < 0)
    blocks = [(int(a), int(b)) for a, b in zip(before["addr"], before["size_bytes"], strict=True)]
    return start, blocks


def alternatives(recorded: AllocatorSettings, largest_bytes: int) -> list[AllocatorSettings]:
    """The settings to try. A ``max_split_size_mb`` above the largest segment the trace can
    make (``largest_bytes``) never finds a block to keep whole: it would replay as the
    defaults do, so it is not tried (the replay is the costly part on a big trace)."""
    found = [replace(recorded, expandable_segments=not recorded.expandable_segments)]
    for mb in MAX_SPLIT_CHOICES_MB:
        if recorded.max_split_bytes != mb << 20 and mb << 20 <= largest_bytes:
            found.append(replace(recorded, expandable_segments=False, max_split_bytes=mb << 20))
    if recorded.max_split_bytes is not None:
        found.append(replace(recorded, expandable_segments=False, max_split_bytes=None))
    return [s for s in found if s != recorded]


def run(
    snapshot: MemorySnapshot,
    replay: DeviceReplay,
    expandable: bool,
    limit_bytes: int | None = None,
) -> WhatIfResult:
    """``limit_bytes``: the memory the process could hold when it ran out (from the OOM), so
    that each setting is also judged on whether it would have run out."""
    if replay.levels.filter(pl.col("action") == "alloc").is_empty():
        return WhatIfResult(
            available=False, reason="no allocations in the trace to replay", device=replay.device
        )
    trace = requests(snapshot, replay)
    recorded = replace(
        recorded_settings(snapshot.allocator_settings, expandable), limit_bytes=limit_bytes
    )
    largest = allocation_size(round_size(max(trace[2], default=0)))  # at C speed on an array
    tried = [recorded, *alternatives(recorded, largest)]
    seed = start_state(snapshot, replay)
    before = int((replay.allocations["alloc_idx"] < 0).sum())
    actions, addrs, sizes, streams = trace
    seeded = (actions[before:], addrs[before:], sizes[before:], streams[before:])
    # The recorded settings replay from the layout the trace started in (the replay check);
    # the alternatives would not have left that layout, so each replays the trace from an
    # empty cache, and is weighed against the recorded settings replayed the same way.
    runs = simulate_each(trace, tried)
    fresh = runs[0]
    if seed is not None and not recorded.expandable_segments:
        runs[0] = simulate(*seeded, settings=recorded, seed=seed)
    truth = int(replay.levels["reserved_bytes"].max() or 0)  # type: ignore[arg-type]
    base = runs[0]
    error = base.peak_reserved_bytes / truth - 1 if truth else 0.0
    table = _table(runs)
    # Under a limit, running out decides first; then the memory reserved.
    best = min(runs[1:], key=lambda r: (r.ooms > 0, r.peak_reserved_bytes), default=None)
    saving = fresh.peak_reserved_bytes - best.peak_reserved_bytes if best else 0
    avoids_oom = best is not None and fresh.ooms > 0 and best.ooms == 0
    recorded_oom = replay.levels.filter(pl.col("action") == "oom").height > 0
    trusted = abs(error) <= MAX_REPLAY_ERROR and (base.ooms > 0) == recorded_oom
    helps = (
        trusted
        and best is not None
        and (
            avoids_oom
            or (best.ooms <= fresh.ooms and saving >= MIN_SAVING * fresh.peak_reserved_bytes)
        )
    )
    return WhatIfResult(
        device=replay.device,
        recorded_settings=recorded.label(),
        recorded_peak_reserved_bytes=truth,
        replayed_peak_reserved_bytes=base.peak_reserved_bytes,
        replay_error=error,
        runs=table,
        best_settings=best.settings.label() if best and helps else "",
        best_saving_bytes=saving if helps else 0,
        limit_bytes=limit_bytes or 0,
        advice=_advice(fresh, best, saving, helps, avoids_oom)
        + (
            f" (every setting replayed from an empty cache, where the recorded one reserves "
            f"{fmt_bytes(fresh.peak_reserved_bytes)}: the history is cut short, and the layout it "
            "started in is the recorded settings' own)"
            if runs[0] is not fresh
            else ""
        )
        if trusted
        else (
            f"no prediction: the replay reserves {fmt_bytes(base.peak_reserved_bytes)} at the peak "
            f"where the snapshot recorded {fmt_bytes(truth)} ({error:+.0%})"
            + (
                ""
                if (base.ooms > 0) == recorded_oom
                else ", and does not run out where the trace did"
            )
            + ", so it does not follow this trace (hand-made, cut short, or using pools it does not model)"
        ),
    )


def _table(runs: list[SimulatedRun]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "settings": ["recorded: " + runs[0].settings.label()]
            + [r.settings.label() for r in runs[1:]],
            "peak_reserved_bytes": [r.peak_reserved_bytes for r in runs],
            "peak_allocated_bytes": [r.peak_allocated_bytes for r in runs],
            "cudamalloc_calls": [r.segment_allocs for r in runs],
            "segment_maps": [r.segment_maps for r in runs],
            "ooms": [r.ooms for r in runs],
        },
        schema={
            "settings": pl.String,
            "peak_reserved_bytes": pl.Int64,
            "peak_allocated_bytes": pl.Int64,
            "cudamalloc_calls": pl.Int64,
            "segment_maps": pl.Int64,
            "ooms": pl.Int64,
        },
    )


def _advice(
    base: SimulatedRun, best: SimulatedRun | None, saving: int, helps: bool, avoids_oom: bool
) -> str:
    if base.ooms and best is not None and best.ooms:
        return (
            "every setting tried runs out of memory under the same limit: no allocator setting "
            "fixes it (see the fixes for the out-of-memory error)"
        )
    if best is None or not helps:
        return (
            f"no setting tried reserves {MIN_SAVING:.0%} less than the recorded one "
            f"({fmt_bytes(base.peak_reserved_bytes)} replayed at the peak)"
        )
    share = saving / base.peak_reserved_bytes
    if avoids_oom:
        return (
            f"PYTORCH_CUDA_ALLOC_CONF={best.settings.label()} is predicted to run without the "
            f"out-of-memory error under the same limit ({fmt_bytes(best.peak_reserved_bytes)} "
            "reserved at the peak)"
        )
    return (
        f"PYTORCH_CUDA_ALLOC_CONF={best.settings.label()} is predicted to reserve "
        f"{fmt_bytes(best.peak_reserved_bytes)} at the peak instead of "
        f"{fmt_bytes(base.peak_reserved_bytes)}: {fmt_bytes(saving)} ({share:.0%}) less"
    )
