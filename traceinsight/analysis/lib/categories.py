"""Categories of GPU work (compute, communication, memcpy by direction and memory kind, memset).

One definition for every analysis that splits device time by what ran.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from traceinsight.analysis.classify import classify_names

# Busy categories in priority order (first wins where they overlap), then idle.
CATEGORIES = (
    "compute",
    "communication",
    "memcpy_h2d_pageable",
    "memcpy_h2d_pinned",
    "memcpy_h2d",
    "memcpy_d2h_pageable",
    "memcpy_d2h_pinned",
    "memcpy_d2h",
    "memcpy_d2d",
    "memcpy_p2p",
    "memcpy_other",
    "memset",
)
IDLE = "idle"
PRIORITY = {name: level for level, name in enumerate(CATEGORIES)}

_DIRECTIONS = {"htod": "h2d", "dtoh": "d2h", "dtod": "d2d", "ptop": "p2p"}
_HOST_MEMORY = ("pageable", "pinned")


def group_of(category: str) -> str:
    """compute / communication / memcpy / memset / idle for a category name."""
    return category.split("_", 1)[0]


def communication_names(names: pl.Series) -> list[str]:
    """The names the kernel classifier calls communication: NCCL/RCCL, symmetric-memory and
    custom all-reduce kernels (vLLM's cross_device_reduce, one_shot_all_reduce, ...)."""
    classes = classify_names(names.cast(pl.String).drop_nulls().unique())
    return classes.filter(pl.col("family") == "communication")["name"].to_list()


def is_communication(comm_names: Collection[str], has_collective: pl.Expr | None = None) -> pl.Expr:
    """Communication kernels: the classifier's family (``comm_names``, from
    :func:`communication_names`), or a collective recorded in the kernel's args."""
    collective = pl.col("collective_name").is_not_null() if has_collective is None else has_collective
    return pl.col("name").cast(pl.String).is_in(list(comm_names)) | collective


def _memcpy_category() -> pl.Expr:
    # Kineto names copies like "Memcpy HtoD (Pageable -> Device)" / "Memcpy DtoH (Device -> Pinned)".
    name = pl.col("name").cast(pl.String).str.to_lowercase()
    direction = name.str.extract(r"memcpy\s+(\w+)", 1).replace_strict(
        _DIRECTIONS, default="other", return_dtype=pl.String
    )
    src = name.str.extract(r"\(\s*(\w+)\s*->", 1)
    dst = name.str.extract(r"->\s*(\w+)\s*\)", 1)
    host_side = pl.when(direction == "h2d").then(src).when(direction == "d2h").then(dst)
    memory = pl.when(host_side.is_in(list(_HOST_MEMORY))).then(pl.lit("_") + host_side).otherwise(pl.lit(""))
    return pl.concat_str(
        pl.lit("memcpy_"),
        direction,
        pl.when(direction.is_in(["h2d", "d2h"])).then(memory).otherwise(pl.lit("")),
    )


def category_expr(comm_names: Collection[str], has_collective: pl.Expr | None = None) -> pl.Expr:
    """The breakdown category of each row of ``Trace.kernels`` (``comm_names``: the names the
    classifier calls communication; ``has_collective`` stands in for ``collective_name is not
    null`` where that column is not at hand)."""
    kind = pl.col("kind").cast(pl.String)
    return (
        pl.when(kind == "memset")
        .then(pl.lit("memset"))
        .when(kind == "memcpy")
        .then(_memcpy_category())
        .when(is_communication(comm_names, has_collective))
        .then(pl.lit("communication"))
        .otherwise(pl.lit("compute"))
    )
