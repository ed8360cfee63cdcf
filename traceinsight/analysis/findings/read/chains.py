"""Chains of memory-bound kernels between compute kernels, and what one fused kernel would cost.

Per (device, stream), the kernel sequence is cut at every kernel that is not memory-bound
(GEMM, convolution, attention, collectives, copies between memories, anything unclassified)
and at step boundaries. What is left between two cuts is a *chain*: consecutive elementwise,
normalization, reduction, softmax, layout-copy and RNG kernels. Chains of two or more kernels
are grouped by their sequence of kernel names; a sequence that recurs (once per layer, once
per step) is a fusion candidate: one kernel could read the chain's inputs and write its output
once, instead of every kernel reading and writing the whole tensor.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.cost import model as costmodel
from traceinsight.trace.model import Trace

# Kernel families a fuser (Inductor, a hand-written fused kernel) folds into one pass over memory.
MEMORY_FAMILIES = ("elementwise", "normalization", "reduction", "softmax", "copy", "rng")
# Kernel families that mark the borders of a chain when they surround a softmax: the
# matmul-softmax-matmul core of eager attention is fused by a fused attention kernel instead.
ATTENTION_BORDER = ("gemm",)
# Kernels written by a compiler that already fused them (Inductor's Triton kernels).
COMPILED_LIBRARY = "inductor"
# Kernels that are not the chain's own work: foreach kernels each touch many tensors at once
# (an optimizer's or a gradient clip's, the unfused_optimizer finding's), fills initialise
# buffers that nothing in the chain produced.
NOT_CHAIN_SUBFAMILIES = ("foreach", "fill")
# Kernels of the optimizer step and zero_grad: their own findings price them.
NOT_CHAIN_ANNOTATION = r"^Optimizer\."
# The library calls a compiler leaves as calls (Inductor's "extern kernels"): GEMMs,
# convolutions forward and backward, fused attention. The memory-bound kernels such a call
# launches besides its main one (cuDNN's NCHW <-> NHWC conversions around a kernel that wants the
# other layout, split-K reductions) run inside it: no fuser merges them with the ops around the
# call, so they cut a chain as the call's main kernel does. What removes cuDNN's conversions is
# the channels_last layout (its own finding).
LIBRARY_CALL_OPS = (
    r"^aten::(mm|addmm|bmm|baddbmm|_?convolution|(cudnn_|miopen_)convolution|convolution_backward"
    r"|_scaled_dot_product_\w+|_flash_attention_\w+|_efficient_attention_\w+)$"
)
# A sequence must occur at least this often to be a pattern (per layer, per step).
MIN_OCCURRENCES = 2
MIN_CHAIN_KERNELS = 2

CHAIN_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "device": pl.Int64,
    "stream": pl.Int64,
    "chain": pl.UInt32,
    "key": pl.String,
    "kernels": pl.UInt32,
    "ids": pl.List(pl.Int64),
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "kernel_ns": pl.Int64,
    "first_ns": pl.Int64,
    "min_ns": pl.Int64,
    "first_bytes": pl.Float64,
    "last_ns": pl.Int64,
    "last_bytes": pl.Float64,
    "copy_ns": pl.Int64,
    "starts": pl.List(pl.Int64),
    "compiled": pl.UInt32,
    "reductions": pl.UInt32,
    "families": pl.List(pl.String),
    "names": pl.List(pl.String),
    "durs": pl.List(pl.Int64),
    "op_names": pl.List(pl.String),
}


def _kernels(trace: Trace, vendor: str | None) -> pl.DataFrame:
    # copies and memsets stay in the sequence: they cut chains (a copy to the host between two
    # kernels is a synchronisation no fusion crosses)
    k = trace.kernels.filter(pl.col("device").is_not_null()).select(
        "id", "device", "stream", "ts_ns", "dur_ns", "end_ns", pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String),
        pl.col("op_name").cast(pl.String), "step", pl.col("annotation").cast(pl.String),
    )
    classes = with_classes(k.select("name").unique(), vendor=vendor).select("name", "family", "subfamily", "library")
    k = k.join(classes, on="name", how="left").with_columns(
        family=pl.when(pl.col("kind") == "kernel").then(pl.col("family")).otherwise(pl.col("kind"))
    )
    return k.sort(["device", "stream", "ts_ns"])


def find_chains(trace: Trace, vendor: str | None = None) -> pl.DataFrame:
    """Every chain of ≥ 2 memory-bound kernels on a stream (``CHAIN_COLUMNS``), one row each,
    with ``occurrences``: how often its name sequence occurs in the trace."""
    k = _kernels(trace, vendor)
    if k.height == 0:
        return pl.DataFrame(schema={**CHAIN_COLUMNS, "occurrences": pl.UInt32})
    # launched by a library call (matched once per row here, read twice below)
    k = k.with_columns(library_call=pl.col("op_name").fill_null("").str.contains(LIBRARY_CALL_OPS))
    memory = (
        pl.col("family").is_in(list(MEMORY_FAMILIES))
        & ~pl.col("subfamily").fill_null("").is_in(list(NOT_CHAIN_SUBFAMILIES))
        & ~pl.col("annotation").fill_null("").str.contains(NOT_CHAIN_ANNOTATION)
        & ~pl.col("library_call")
    )
    lane = ["device", "stream"]
    # a new chain starts at every cut (a non-memory kernel) and where the step changes
    step = pl.col("step").fill_null(-1)
    cut = (~memory) | (step != step.shift(1).over(lane)).fill_null(True)
    # a library call's own memory-bound kernels border a chain as the call does
    border = pl.when(~memory & (pl.col("kind") == "kernel")).then(
        pl.when(pl.col("family").is_in(list(MEMORY_FAMILIES)) & pl.col("library_call"))
        .then(pl.when(pl.col("op_name").str.contains("conv")).then(pl.lit("conv")).otherwise(pl.lit("gemm")))
        .otherwise(pl.col("family"))
    )
    k = k.with_columns(
        chain=cut.cast(pl.UInt32).cum_sum().over(lane),
        # the nearest kernel before and after that is not memory-bound (memsets and copies
        # between memories skipped): what the chain sits between
        prev_family=border.shift(1).forward_fill().over(lane),
        next_family=border.shift(-1).backward_fill().over(lane),
    )
    members = k.filter(memory)
    if members.height == 0:
        return pl.DataFrame(schema={**CHAIN_COLUMNS, "occurrences": pl.UInt32})
    # what the first and last kernels of each chain move, from their ops' shapes and dtypes
    ends = members.group_by([*lane, "chain"]).agg(pl.col("id").first().alias("a"), pl.col("id").last().alias("b"))
    end_ids = pl.concat([ends["a"], ends["b"]])
    costs = costmodel.kernel_costs(trace).filter(pl.col("id").is_in(end_ids.implode()))
    members = members.join(costs.select("id", pl.col("bytes").alias("cost_bytes")), on="id", how="left")
    chains = (
        members.group_by([*lane, "chain"], maintain_order=True)
        .agg(
            pl.col("name").str.join("\n").alias("key"),
            pl.len().alias("kernels"),
            pl.col("id").alias("ids"),
            pl.col("ts_ns").min().alias("start_ns"),
            pl.col("end_ns").max().alias("end_ns"),
            pl.col("dur_ns").sum().alias("kernel_ns"),
            pl.col("dur_ns").first().alias("first_ns"),
            pl.col("dur_ns").min().alias("min_ns"),
            pl.col("cost_bytes").first().alias("first_bytes"),
            pl.col("dur_ns").last().alias("last_ns"),
            pl.col("cost_bytes").last().alias("last_bytes"),
            pl.col("dur_ns").filter(pl.col("family") == "copy").sum().alias("copy_ns"),
            pl.col("ts_ns").alias("starts"),
            (pl.col("library") == COMPILED_LIBRARY).sum().alias("compiled"),
            (pl.col("family") == "reduction").sum().alias("reductions"),
            pl.col("family").alias("families"),
            pl.col("name").alias("names"),
            pl.col("dur_ns").alias("durs"),
            pl.col("op_name").alias("op_names"),
            pl.col("prev_family").first().alias("_before"),
            pl.col("next_family").last().alias("_after"),
        )
        .filter(pl.col("kernels") >= MIN_CHAIN_KERNELS)
    )
    # the softmax between two GEMMs is eager attention's core: a fused attention kernel's job
    attention_core = (
        pl.col("families").list.contains("softmax")
        & pl.col("_before").is_in(list(ATTENTION_BORDER))
        & pl.col("_after").is_in(list(ATTENTION_BORDER))
    )
    chains = chains.filter(~attention_core).drop("_before", "_after")
    chains = chains.with_columns(occurrences=pl.len().over("key").cast(pl.UInt32))
    return chains.select([pl.col(c).cast(t) for c, t in CHAIN_COLUMNS.items()] + [pl.col("occurrences")])
