"""The role each allocation plays in a training step, from its stacks and the step's phases.

The categories are those of PyTorch's memory timeline (``torch.profiler``'s
``export_memory_timeline``: parameter, optimizer state, gradient, activation, temporary,
input, unknown), read here from an allocator snapshot, which records no tensor identities,
only where each block was allocated and freed:

- the **phase** of an event comes from its stack: ``backward`` when a frame is the autograd
  engine, an autograd node's ``apply`` or ``backward``; ``optimizer`` when a frame is in an
  optimizer's file (``torch/optim/``) or is ``zero_grad``; ``forward`` when a frame is named
  ``forward``. In a recording with stacks, an event without any frame ran on a thread without
  Python, which in a training step is the autograd engine's: ``backward``.
- an **iteration** ends with each optimizer step (the last event of a run of optimizer
  events, events of no phase skipped); without an optimizer in the trace, at the iteration
  boundaries the leak analysis finds.

Then, per allocation (``survives``: still held at the end of the iteration it was made in; one
still held when the snapshot was taken, made in the iteration the trace ends in, counts as
not surviving: that iteration did not end, as when the snapshot is dumped at an OOM):

- made in the optimizer: ``optimizer_state`` if it survives, else ``temporary``;
- made in backward: ``temporary`` if freed in backward, else ``gradient`` (freed by
  ``zero_grad``, or kept for accumulation);
- made in forward: ``activation`` if freed in backward (saved for it), ``kept`` if it
  survives, else ``temporary``;
- made outside the three phases: ``parameter`` if made before the first phase and it survives
  (the model and its buffers), ``kept`` if it survives, ``activation`` if freed in backward
  (an input saved for backward), else ``temporary``;
- made before the trace began, or in a trace where no stack names a phase: ``unknown``.

``kept`` has no counterpart in PyTorch's categories: memory held from one iteration to the next
that is none of the above (a list of losses, a cache, a leak).
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.snapshot.replay import DeviceReplay
from traceinsight.trace.snapshot.model import MemorySnapshot

ROLES = (
    "parameter",
    "gradient",
    "optimizer_state",
    "activation",
    "temporary",
    "kept",
    "unknown",
)
BACKWARD_NAME = (
    r"torch::autograd::Engine|Backward\w*::apply|^(_engine_run_backward|run_backward|backward)$"
)
OPTIMIZER_FILE = r"(^|/)torch/optim/|(^|/)optim(izers?)?/|optimizer\.py$"
PHASE_SCHEMA = pl.Schema({"stack_id": pl.Int64(), "phase": pl.String()})


def stack_phases(snapshot: MemorySnapshot) -> pl.DataFrame:
    """One row per stack: ``backward``, ``optimizer``, ``forward`` or null (none of them)."""
    frames = snapshot.frames
    if frames.is_empty():
        return pl.DataFrame(schema=PHASE_SCHEMA)
    marks = frames.group_by("stack_id").agg(
        pl.col("name").str.contains(BACKWARD_NAME).any().alias("backward"),
        (pl.col("filename").str.contains(OPTIMIZER_FILE) | (pl.col("name") == "zero_grad"))
        .any()
        .alias("optimizer"),
        (pl.col("name") == "forward").any().alias("forward"),
    )
    # Backward first: a recomputed forward (activation checkpointing) runs inside it.
    return marks.select(
        "stack_id",
        pl.when(pl.col("backward"))
        .then(pl.lit("backward"))
        .when(pl.col("optimizer"))
        .then(pl.lit("optimizer"))
        .when(pl.col("forward"))
        .then(pl.lit("forward"))
        .alias("phase"),
    ).cast(PHASE_SCHEMA)


def with_roles(
    replay: DeviceReplay,
    snapshot: MemorySnapshot,
    boundaries: list[int] | tuple[int, ...],
    *,
    loop_start: int | None = None,
) -> pl.DataFrame:
    """``replay.allocations`` with ``alloc_phase``, ``free_phase`` and ``role`` columns.

    ``boundaries``: the last event of each iteration; ``loop_start``: the first event of the
    first whole iteration when they come from a marker allocation (:func:`find_iterations`),
    which can fall in the middle of a step."""
    phases = stack_phases(snapshot)
    has_stacks = not phases.is_empty()
    stackless = pl.lit("backward" if has_stacks else None, pl.String)
    stacks = _event_stacks(snapshot, replay.device)
    tagged = stacks.join(phases, on="stack_id", how="left").select(
        "idx",
        "action",
        pl.when(pl.col("stack_id").is_null())
        .then(stackless)
        .otherwise(pl.col("phase"))
        .alias("phase"),
    )
    steps = optimizer_ends(tagged)
    if steps:
        boundaries = steps
        loop_start = None  # the loop starts with the first phase, below
    free_phase = tagged.filter(pl.col("action") == "free_completed").select(
        pl.col("idx").alias("free_idx"), pl.col("phase").alias("free_phase")
    )
    allocations = (
        replay.allocations.join(phases, on="stack_id", how="left")
        .with_columns(
            pl.when(pl.col("alloc_idx") < 0)
            .then(pl.lit(None, pl.String))
            .when(pl.col("stack_id").is_null())
            .then(stackless)
            .otherwise(pl.col("phase"))
            .alias("alloc_phase")
        )
        .drop("phase")
        .join(free_phase, on="free_idx", how="left")
    )
    first_phase = allocations.filter(pl.col("alloc_phase").is_not_null())["alloc_idx"].min()
    first = int(first_phase) if first_phase is not None else -1  # type: ignore[arg-type]
    # Before the loop: before the first phase of a step, or before the first whole iteration
    # the marker allocations show (whatever the phase its stack names: a model built inside a
    # module's call still comes before the loop).
    start = first if loop_start is None else loop_start
    edges = pl.Series("edges", list(boundaries), dtype=pl.Int64)
    iteration = allocations.select(
        edges.search_sorted(allocations["alloc_idx"], side="left").alias("alloc_it"),
        edges.search_sorted(allocations["free_idx"].fill_null(-1), side="left").alias("free_it"),
    )
    last_idx = int(replay.levels["idx"][-1]) if replay.levels.height else 0
    last_it = int(edges.search_sorted(last_idx, side="left"))
    survives = (
        pl.when(pl.col("free_idx").is_null())
        .then(pl.col("alloc_it") < last_it)
        .otherwise(pl.col("free_it") > pl.col("alloc_it"))
    )
    unfinished = pl.col("free_idx").is_null() & ~survives
    # An iteration found from a marker allocation can begin in the middle of a step: memory
    # freed by the backward of the iteration after its own was still saved for that backward.
    later = 0 if loop_start is None else 1
    freed_in_backward = (pl.col("free_phase") == "backward") & (
        pl.col("free_it") <= pl.col("alloc_it") + later
    )
    # Made before the loop and held through its first iteration: the model's parameters and
    # buffers (or state loaded before training), never kept from earlier iterations.
    held_on = pl.col("free_idx").is_null()
    if boundaries:
        held_on = held_on | (pl.col("free_idx") > boundaries[0])
    before_loop = (pl.col("alloc_idx") < start) & held_on
    phase = pl.col("alloc_phase")
    role = (
        pl.when(pl.col("alloc_idx") < 0)
        .then(pl.lit("unknown"))
        .when(phase == "optimizer")
        .then(pl.when(survives).then(pl.lit("optimizer_state")).otherwise(pl.lit("temporary")))
        .when(phase == "backward")
        .then(
            pl.when(freed_in_backward & ~survives & ~unfinished)
            .then(pl.lit("temporary"))
            .otherwise(pl.lit("gradient"))
        )
        .when(before_loop)
        .then(pl.lit("parameter"))
        .when(phase == "forward")
        .then(
            # an unfinished iteration's forward: held for its backward
            pl.when(freed_in_backward | unfinished)
            .then(pl.lit("activation"))
            .when(survives)
            .then(pl.lit("kept"))
            .otherwise(pl.lit("temporary"))
        )
        .when(survives)
        .then(pl.lit("kept"))
        .when(freed_in_backward)
        .then(pl.lit("activation"))
        .otherwise(pl.lit("temporary"))
    )
    if first_phase is None:
        # No stack names a phase (not a training or inference loop, or no stacks): no role
        # can be told.
        role = pl.lit("unknown")
    return (
        pl.concat([allocations, iteration], how="horizontal")
        .with_columns(role.alias("role"))
        .drop("alloc_it", "free_it")
    )


def optimizer_ends(tagged: pl.DataFrame) -> list[int]:
    """The last event of each run of optimizer events (events of no phase skipped): the end
    of each training iteration."""
    known = tagged.filter(pl.col("phase").is_not_null())
    if known.is_empty():
        return []
    runs = known.with_columns(
        (pl.col("phase") != pl.col("phase").shift(1)).fill_null(True).cum_sum().alias("run")
    )
    ends = (
        runs.filter(pl.col("phase") == "optimizer")
        .group_by("run")
        .agg(pl.col("idx").max())
        .sort("idx")
    )
    return [int(i) for i in ends["idx"].to_list()]


def _event_stacks(snapshot: MemorySnapshot, device: int) -> pl.DataFrame:
    events = snapshot.events
    return events.filter(
        (pl.col("device") == device) & pl.col("action").is_in(["alloc", "free_completed"])
    ).select("idx", "action", "stack_id")


def by_role(allocations: pl.DataFrame) -> pl.DataFrame:
    """Bytes and allocations per role, in :data:`ROLES` order, roles holding nothing left out."""
    order = pl.DataFrame({"role": list(ROLES), "order": list(range(len(ROLES)))})
    return (
        allocations.group_by("role")
        .agg(pl.col("size_bytes").sum().alias("bytes"), pl.len().cast(pl.Int64).alias("count"))
        .join(order, on="role", how="left")
        .filter(pl.col("bytes") > 0)
        .sort("order")
        .drop("order")
    )
