"""Allocation sites: the first frame of a stack that is the user's own code.

A stack recorded by the allocator starts deep inside PyTorch (``torch/nn/modules/linear.py``,
``torch/_tensor.py``) and the standard library; the line a user can change is the first frame
outside those. Library frames above it are folded into a count.
"""

from __future__ import annotations

import polars as pl

from traceinsight.trace.snapshot.model import MemorySnapshot

# Paths that are not the user's code: PyTorch itself, installed packages, frozen modules and
# the interpreter's own library (``/lib/python3.11/``), and C++ frames (``stacks="all"``).
LIBRARY_PATTERN = r"(^|/)torch/|site-packages/|dist-packages/|^<frozen |/lib/python3\.\d+/|\.(cpp|cc|cu|cuh|h|hpp)$|^\?\?$|^$"

# A Python frame: a ``.py`` file or a ``<frozen ...>``/``<string>`` module; the rest are C++.
PYTHON_FILE = r"\.py$|^<"
# C++ frames that name the operation: the dispatcher's entry for an aten op, and the autograd
# node that ran it.
ATEN_OP = r"^at::_ops::(\w+)::call\("
AUTOGRAD_NODE = r"(?:^|::)(\w+Backward\w*)::apply\("
# C++ frames that only record or allocate (the unwinder, the allocator, tensor factories).
CPP_PLUMBING = r"^(torch::unwind|torch::CapturedTraceback|torch::cuda::\(anonymous|c10::|at::detail::empty|at::native::empty|at::_ops::empty|at::\(anonymous|std::|__clone|pthread_)"

# The site of allocations made before the recorded trace began: only their free was recorded.
BEFORE_TRACE = "(allocated before the trace began)"
# A stack-less allocation (recorded without stacks, or ``context=None``).
NO_STACK = "(no stack recorded)"

SITE_SCHEMA = pl.Schema(
    {
        "stack_id": pl.Int64(),
        "site": pl.String(),
        "library_frames": pl.Int64(),  # frames inside libraries below the site, folded
        "in_forward": pl.Boolean(),  # a user frame named ``forward`` and no frame named like ``backward``
    }
)


def site_label(filename: str, line: int, name: str) -> str:
    return f"{filename}:{line} ({name})"


def sites(snapshot: MemorySnapshot) -> pl.DataFrame:
    """One row per stack: its site label, the library frames folded, whether it ran in a forward."""
    frames = snapshot.frames
    if frames.is_empty():
        return pl.DataFrame(schema=SITE_SCHEMA)
    marked = frames.with_columns(
        pl.col("filename").str.contains(LIBRARY_PATTERN).alias("library"),
        pl.concat_str(
            pl.col("filename"),
            pl.lit(":"),
            pl.col("line").cast(pl.String),
            pl.lit(" ("),
            pl.col("name"),
            pl.lit(")"),
        ).alias("label"),
    )
    user = (
        marked.filter(~pl.col("library"))
        .group_by("stack_id")
        .agg(
            pl.col("label").sort_by("depth").first().alias("user_site"),
            pl.col("depth").min().alias("library_frames"),
        )
    )
    python = (
        marked.filter(pl.col("filename").str.contains(PYTHON_FILE))
        .group_by("stack_id")
        .agg((pl.col("label").sort_by("depth").first() + pl.lit(" [library]")).alias("python_site"))
    )
    operation = _operations(marked)
    innermost = marked.filter(pl.col("depth") == 0).select(
        "stack_id", (pl.col("label") + pl.lit(" [library]")).alias("library_site")
    )
    context = marked.group_by("stack_id").agg(
        # A forward of the user's own module: library layers (linear.py's forward) are called
        # from the optimizer and loss code too.
        (
            (~pl.col("library") & (pl.col("name") == "forward")).any()
            & ~pl.col("name").str.contains("backward").any()
        ).alias("in_forward"),
        pl.len().alias("depth_count"),
    )
    return (
        context.join(user, on="stack_id", how="left")
        .join(python, on="stack_id", how="left")
        .join(operation, on="stack_id", how="left")
        .join(innermost, on="stack_id", how="left")
        .select(
            "stack_id",
            pl.coalesce("user_site", "python_site", "operation_site", "library_site").alias("site"),
            pl.coalesce("library_frames", pl.col("depth_count") - 1).alias("library_frames"),
            "in_forward",
        )
        .sort("stack_id")
        .cast(SITE_SCHEMA)
    )


def _operations(marked: pl.DataFrame) -> pl.DataFrame:
    """Per C++-only stack, the operation it ran: ``aten::OP`` (the outermost dispatcher call:
    inner ones are the factories and kernels it calls), ``in NODE`` when an autograd node ran it;
    else the innermost C++ function that is not recording or allocating."""
    names = marked.select(
        "stack_id",
        "depth",
        pl.col("name").str.extract(ATEN_OP, 1).alias("op"),
        pl.col("name").str.extract(AUTOGRAD_NODE, 1).alias("node"),
        pl.when(~pl.col("name").str.contains(CPP_PLUMBING) & (pl.col("name") != ""))
        .then(pl.col("name").str.replace(r"\(.*$", ""))
        .alias("function"),
    )
    per_stack = names.group_by("stack_id").agg(
        pl.col("op")
        .drop_nulls()
        .sort_by(pl.col("depth").filter(pl.col("op").is_not_null()))
        .last(),
        pl.col("node")
        .drop_nulls()
        .sort_by(pl.col("depth").filter(pl.col("node").is_not_null()))
        .first(),
        pl.col("function")
        .drop_nulls()
        .sort_by(pl.col("depth").filter(pl.col("function").is_not_null()))
        .first(),
    )
    named = pl.coalesce(pl.lit("aten::") + pl.col("op"), pl.col("function"))
    return per_stack.select(
        "stack_id",
        pl.when(pl.col("node").is_not_null())
        .then(pl.coalesce(named, pl.col("node")) + pl.lit(" in ") + pl.col("node"))
        .otherwise(named)
        .add(pl.lit(" [C++]"))
        .alias("operation_site"),
    )


def with_site(
    frame: pl.DataFrame, site_table: pl.DataFrame, *, before_trace: pl.Expr | None = None
) -> pl.DataFrame:
    """``frame`` (with a ``stack_id``) with its ``site`` and ``in_forward`` columns; rows without
    a stack are labelled :data:`BEFORE_TRACE` where ``before_trace`` holds, else :data:`NO_STACK`."""
    joined = frame.join(
        site_table.select("stack_id", "site", "in_forward"), on="stack_id", how="left"
    )
    missing = (
        pl.lit(NO_STACK)
        if before_trace is None
        else pl.when(before_trace).then(pl.lit(BEFORE_TRACE)).otherwise(pl.lit(NO_STACK))
    )
    return joined.with_columns(
        pl.col("site").fill_null(missing), pl.col("in_forward").fill_null(False)
    )


def by_site(allocations: pl.DataFrame) -> pl.DataFrame:
    """Bytes and allocation count per site, most bytes first (ties by site name, for a stable order)."""
    return (
        allocations.group_by("site")
        .agg(
            pl.col("size_bytes").sum().alias("bytes"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("in_forward").all().alias("in_forward"),
        )
        .sort(["bytes", "site"], descending=[True, False])
    )
