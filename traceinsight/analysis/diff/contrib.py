"""What changed where: GPU time per step by op (and shapes), kernel and annotated region."""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.diff.side import NO_ANNOTATION, NO_OP, Side, kernels_in_steps

CONTRIBUTION_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "before_ns_per_step": pl.Float64,
    "after_ns_per_step": pl.Float64,
    "delta_ns_per_step": pl.Float64,
    "ratio": pl.Float64,
    "before_calls_per_step": pl.Float64,
    "after_calls_per_step": pl.Float64,
    "status": pl.String,
    "share_of_delta": pl.Float64,
}


def contributions(
    before: pl.DataFrame, after: pl.DataFrame, keys: list[str], before_per: int, after_per: int
) -> pl.DataFrame:
    """Per key: GPU ns and calls per step on each side, the delta, and its share of the total delta.

    ``before``/``after`` hold ``keys`` and ``dur_ns``, one row per kernel. Rows are ranked by
    the size of their delta; ``status`` says whether a key exists on both sides or only one.
    """
    schema = {k: pl.String for k in keys} | CONTRIBUTION_SCHEMA

    def agg(frame: pl.DataFrame, prefix: str, per: int) -> pl.DataFrame:
        return frame.group_by(keys).agg(
            (pl.col("dur_ns").sum() / per).alias(f"{prefix}_ns_per_step"),
            (pl.len() / per).alias(f"{prefix}_calls_per_step"),
        )

    if before.height == 0 and after.height == 0:
        return pl.DataFrame(schema=schema)
    cast_keys = [pl.col(k).cast(pl.String) for k in keys]
    b = agg(before.with_columns(cast_keys), "before", before_per)
    a = agg(after.with_columns(cast_keys), "after", after_per)
    joined = b.join(a, on=keys, how="full", coalesce=True, nulls_equal=True)
    status = (
        pl.when(pl.col("before_ns_per_step").is_null())
        .then(pl.lit("added"))
        .when(pl.col("after_ns_per_step").is_null())
        .then(pl.lit("removed"))
        .otherwise(pl.lit("both"))
    )
    table = joined.with_columns(status=status).with_columns(
        pl.col("before_ns_per_step", "after_ns_per_step", "before_calls_per_step", "after_calls_per_step").fill_null(0.0)
    )
    delta = pl.col("after_ns_per_step") - pl.col("before_ns_per_step")
    table = table.with_columns(
        delta_ns_per_step=delta,
        ratio=pl.when(pl.col("before_ns_per_step") > 0).then(pl.col("after_ns_per_step") / pl.col("before_ns_per_step")),
    )
    # Summed in key order: float addition depends on the order, and group_by's order varies
    # from run to run, which would change the shares in their last digits.
    total_delta = float(table.sort(keys, nulls_last=True)["delta_ns_per_step"].sum())
    table = table.with_columns(
        share_of_delta=(pl.col("delta_ns_per_step") / total_delta) if total_delta else pl.lit(None, dtype=pl.Float64)
    )
    return (
        table.with_columns(_abs=pl.col("delta_ns_per_step").abs())
        .sort(["_abs", *keys], descending=[True, *([False] * len(keys))], nulls_last=True)
        .drop("_abs")
        .select([pl.col(c).cast(t) for c, t in schema.items()])
    )


def op_frame(side: Side) -> pl.DataFrame:
    kernels = kernels_in_steps(side).filter(pl.col("kind") == "kernel")
    shapes = side.trace.events.select(pl.col("id").alias("top_op_id"), pl.col("input_dims"))
    return kernels.join(shapes, on="top_op_id", how="left").select(
        op=pl.col("top_op_name").cast(pl.String).fill_null(NO_OP),
        input_dims=pl.col("input_dims").fill_null(""),
        dur_ns=pl.col("dur_ns"),
    )


def kernel_frame(side: Side) -> pl.DataFrame:
    kernels = kernels_in_steps(side).select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String), "dur_ns")
    if kernels.height == 0:
        return kernels.with_columns(family=pl.lit(None, dtype=pl.String))
    vendor = device_model.from_trace(side.trace).vendor
    return with_classes(kernels, vendor=vendor).select("name", "family", "kind", "dur_ns")


def region_frame(side: Side) -> pl.DataFrame:
    return kernels_in_steps(side).select(
        region=pl.col("annotation").cast(pl.String).fill_null(NO_ANNOTATION), dur_ns=pl.col("dur_ns")
    )
