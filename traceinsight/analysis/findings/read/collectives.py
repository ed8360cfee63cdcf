"""What the communication findings read: each collective call, its kind, size and timing,
the framework that issued it, and how much of the device's collective time no compute hid.

Three places record a collective, and a trace may hold any of them:

- the host call: the ``c10d::<collective>_`` dispatcher op (``c10d::allreduce_``,
  ``c10d::alltoall_base_``; element counts in its input dims) or, with NCCL,
  ``record_param_comms`` (``Collective name``, ``In msg nelems``, ``dtype``);
- the backend's span of the work: ``gloo:all_reduce``, ``nccl:all_to_all`` (a
  record_function on the host, on gloo's worker threads for gloo);
- device kernels: NCCL/RCCL, symmetric-memory and custom all-reduce kernels (the kernel
  classifier's ``communication`` family).

The collective kind comes from the first that says: the kernel's name, its ``Collective
name`` arg, the backend span it ran under (``nccl:all_to_all``), the op that launched it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceinsight.analysis.classify import collective_of, with_classes
from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.host_names import name_matches
from traceinsight.trace.model import Trace

# The record_function a c10d backend wraps around a collective's work: "gloo:all_reduce".
BACKEND_SPAN = r"^(gloo|mpi|ucc|nccl|xccl):(\w+)$"
# Backends that run collectives on host threads (CPU memory; CUDA tensors staged through it).
HOST_BACKENDS = ("gloo", "mpi", "ucc")
# The dispatcher op of a collective call: one per call, on the calling thread.
C10D_OP = r"^c10d::(\w+)$"
# DDP's default bucket size (bucket_cap_mb=25), the unit a bucketed all-reduce moves.
BUCKET_BYTES = 25 * 2**20
# Gradients are reduced in their parameters' type: fp32 unless the trace says otherwise.
DEFAULT_ELEMENT_BYTES = 4
_DTYPE_BYTES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "long": 8, "int": 4, "byte": 1, "char": 1}

# Host names that say which framework issued the collectives.
FRAMEWORKS: tuple[tuple[str, str], ...] = (
    ("fsdp", r"FullyShardedDataParallel|^FSDP::|FSDP\.|fsdp::|_fsdp_"),
    ("ddp", r"DistributedDataParallel|reducer::|ddp\.reducer|^DDP|Reducer"),
    ("torchrec", r"(?i)torchrec|KJTAllToAll|All2All_|TrainPipeline|EmbeddingBagCollection|sharded_embedding"),
    ("moe", r"(?i)moe|expert|dispatch_tokens|combine_tokens|token_dispatch"),
)
CALL_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "step": pl.Int64,
    "tid": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "collective": pl.String,
    "elements": pl.Int64,
}


def _name() -> pl.Expr:
    return pl.col("name").cast(pl.String)


def comm_kernels(trace: Trace, vendor: str | None = None) -> pl.DataFrame:
    """Device communication kernels: device, step, start_ns, end_ns, dur_ns, name, collective."""
    k = trace.kernels.filter(pl.col("kind").cast(pl.String) == "kernel")
    if k.height == 0:
        return pl.DataFrame(schema={"device": pl.Int64, "step": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
                                    "dur_ns": pl.Int64, "name": pl.String, "collective": pl.String})
    cols = ["name", "collective_name", "annotation", "op_name", "top_op_name"]
    keys = k.select([pl.col(c).cast(pl.String) for c in cols]).unique()
    classes = with_classes(keys, vendor=vendor).filter(pl.col("family") == "communication")
    # The backend's span around the launch (nccl:all_to_all) says what the call was: NCCL runs
    # an all-to-all (and, in some versions, other grouped calls) as SendRecv kernels.
    backend = collective_of(pl.col("annotation").str.extract(BACKEND_SPAN, 2))
    classes = classes.with_columns(
        collective=pl.coalesce(
            backend,
            "collective",
            collective_of(pl.col("op_name").str.replace(r"^c10d::", "")),
            collective_of(pl.col("top_op_name").str.replace(r"^c10d::", "")),
        )
    ).select(*cols, "collective")
    return (
        k.with_columns([pl.col(c).cast(pl.String) for c in cols])
        .join(classes, on=cols, how="inner", nulls_equal=True)
        .select("device", "step", pl.col("ts_ns").alias("start_ns"), "end_ns", "dur_ns", "name", "collective")
    )


def exposed_by_collective(trace: Trace, comm: pl.DataFrame) -> pl.DataFrame:
    """Per collective kind (null: not known): kernel time, and the part of it during which no
    compute kernel ran on the same device (``exposed_ns``), counting overlapping collective
    kernels once."""
    if comm.height == 0:
        return pl.DataFrame(schema={"collective": pl.String, "calls": pl.UInt32, "kernel_ns": pl.Int64, "exposed_ns": pl.Int64})
    k = trace.kernels.filter((pl.col("kind").cast(pl.String) == "kernel") & pl.col("device").is_not_null())
    comm_names = comm["name"].unique().to_list()
    compute = k.filter(~_name().is_in(comm_names) & pl.col("collective_name").is_null()).select(
        "device", pl.col("ts_ns").alias("start_ns"), "end_ns"
    )
    # A kernel's exposed part: its time not under compute; where collectives overlap each
    # other, the part already counted by an earlier one is left out (earliest start first).
    rows = comm.sort("start_ns").with_columns(
        prev_end=pl.col("end_ns").cum_max().shift(1).over("device")
    ).with_columns(start_ns=pl.max_horizontal("start_ns", pl.col("prev_end").fill_null(0)))
    rows = rows.with_columns(end_ns=pl.max_horizontal("start_ns", "end_ns"))
    rows = intervals.covered_ns(rows, compute, by=["device"])
    return (
        rows.with_columns(exposed_ns=(pl.col("end_ns") - pl.col("start_ns") - pl.col("covered_ns")).clip(lower_bound=0))
        .group_by("collective")
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum().alias("kernel_ns"), pl.col("exposed_ns").sum())
        .sort("exposed_ns", "collective", descending=[True, False], nulls_last=True)
    )


def _elements(input_dims: pl.Expr) -> pl.Expr:
    """Elements of a call's first (tensor or tensor-list) input, from its input dims text."""
    first = input_dims.str.extract(r"^\[\[(\[[0-9, ]*\](?:,\s*\[[0-9, ]*\])*)\]", 1)
    first = pl.coalesce(first, input_dims.str.extract(r"^\[(\[[0-9, ]*\])", 1))
    shapes = first.str.extract_all(r"\[[0-9, ]*\]")
    numel = shapes.list.eval(
        pl.element().str.extract_all(r"[0-9]+").list.eval(pl.element().cast(pl.Int64)).list.eval(
            pl.element().product()).list.first().fill_null(1)
    )
    return numel.list.sum()


def host_calls(trace: Trace) -> pl.DataFrame:
    """One row per collective call issued by the host (schema :data:`CALL_SCHEMA`).

    Read from the c10d dispatcher ops where the trace has them, else from NCCL's
    ``record_param_comms``, else from the backend spans (``gloo:all_reduce``). Once per trace:
    every communication detector starts from it."""
    return per_trace(trace, "collective_host_calls", lambda: _host_calls(trace))


def _host_calls(trace: Trace) -> pl.DataFrame:
    ev = trace.events.select("kind", "name", "step", "tid", "ts_ns", "end_ns", "input_dims", "collective_name", "in_msg_nelems").filter(
        pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation"])
    )
    c10d = ev.filter(name_matches(ev, C10D_OP)).with_columns(
        collective=collective_of(_name().str.replace(r"^c10d::", "")), elements=_elements(pl.col("input_dims"))
    )
    if c10d.filter(pl.col("collective").is_not_null()).height == 0:
        c10d = ev.filter((_name() == "record_param_comms") & pl.col("collective_name").is_not_null()).with_columns(
            collective=collective_of(pl.col("collective_name").cast(pl.String)), elements=pl.col("in_msg_nelems")
        )
    if c10d.filter(pl.col("collective").is_not_null()).height == 0:
        c10d = backend_spans(trace).with_columns(elements=pl.lit(None, pl.Int64))
    return (
        c10d.filter(pl.col("collective").is_not_null())
        .select(
            "step", "tid", pl.col("ts_ns").alias("start_ns"), "end_ns", "collective", pl.col("elements").cast(pl.Int64)
        )
        .cast(CALL_SCHEMA)  # type: ignore[arg-type]
        .sort("start_ns")
    )


def backend_spans(trace: Trace) -> pl.DataFrame:
    """The backends' host spans of collective work (``gloo:all_reduce`` on gloo's threads):
    backend, collective, step, tid, ts_ns, end_ns, dur_ns. Spans the profiler mirrored onto a
    GPU stream (``gpu_annotation``) are left out."""
    ev = trace.events.select("kind", "name", "step", "tid", "ts_ns", "end_ns", "dur_ns").filter(
        pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation"]) & name_matches(trace.events, BACKEND_SPAN)
    )
    return ev.select(
        _name().str.extract(BACKEND_SPAN, 1).alias("backend"),
        collective_of(_name().str.extract(BACKEND_SPAN, 2)).alias("collective"),
        "step", "tid", "ts_ns", "end_ns", "dur_ns",
    ).filter(pl.col("collective").is_not_null())


def element_bytes(trace: Trace) -> int:
    """Bytes per element of the collectives (record_param_comms' dtype where recorded)."""
    dtypes = trace.events.filter(pl.col("comm_dtype").is_not_null())["comm_dtype"].cast(pl.String)
    if dtypes.len() == 0:
        return DEFAULT_ELEMENT_BYTES
    top = str(dtypes.mode().sort()[0]).lower()
    return next((b for word, b in _DTYPE_BYTES.items() if word in top), DEFAULT_ELEMENT_BYTES)


def frameworks(trace: Trace) -> frozenset[str]:
    """Frameworks whose host spans the trace holds (``ddp``, ``fsdp``, ``torchrec``, ``moe``)."""
    names = trace.events.filter(pl.col("kind").cast(pl.String).is_in(["cpu_op", "user_annotation", "python"]))[
        "name"
    ].cast(pl.String).unique()
    return frozenset(fw for fw, pattern in FRAMEWORKS if bool(names.str.contains(pattern).any()))


@dataclass(frozen=True)
class Phase:
    """Per steady step, the span of one collective kind's calls (first call to last end)."""

    steps: pl.DataFrame  # step, calls, elements, start_ns, end_ns, span_ns

    @property
    def calls_per_step(self) -> float:
        return float(self.steps["calls"].median() or 0.0)  # type: ignore[arg-type]


def phase(trace: Trace, calls: pl.DataFrame, comm: pl.DataFrame, collective: str, steps: list[int]) -> Phase:
    """Per step in ``steps``: calls of ``collective``, their elements, and the span from the
    first call to the end of the last of its calls, backend spans and kernels."""
    mine = calls.filter((pl.col("collective") == collective) & pl.col("step").is_in(steps))
    spans = backend_spans(trace).filter((pl.col("collective") == collective) & pl.col("step").is_in(steps))
    kern = comm.filter((pl.col("collective") == collective) & pl.col("step").is_in(steps))
    ends = pl.concat(
        [
            mine.select("step", "end_ns"),
            spans.select("step", "end_ns"),
            kern.select("step", "end_ns"),
        ]
    ).group_by("step").agg(pl.col("end_ns").max().alias("last_end"))
    per = (
        mine.group_by("step")
        .agg(pl.len().alias("calls"), pl.col("elements").sum(), pl.col("start_ns").min())
        .join(ends, on="step", how="left")
        .with_columns(end_ns=pl.max_horizontal("last_end", "start_ns"))
        .with_columns(span_ns=pl.col("end_ns") - pl.col("start_ns"))
        .drop("last_end")
        .sort("step")
    )
    return Phase(per)
