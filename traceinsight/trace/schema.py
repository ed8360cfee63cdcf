"""Event kinds, column names and dtypes of the frames a :class:`Trace` holds, in one place.

Times are Int64 nanoseconds relative to the trace's ``baseTimeNanoseconds`` (or to the first
event when a trace has no base); Kineto's float microseconds are converted once, on load.
"""

from __future__ import annotations

import polars as pl

# Bump whenever the frames' content or meaning changes: it invalidates every cache entry.
READER_VERSION = 11

KINDS = (
    "cpu_op",
    "user_annotation",
    "gpu_annotation",
    "kernel",
    "memcpy",
    "memset",
    "runtime",
    "driver",
    "python",
    "sync",
    "other",
)
KIND_DTYPE = pl.Enum(KINDS)

# Kinds that run on a device timeline (pid = device, tid = stream in Kineto).
GPU_KINDS = frozenset({"kernel", "memcpy", "memset", "gpu_annotation", "sync"})
# The GPU activity that makes a device busy (annotations and sync markers do not).
GPU_WORK_KINDS = frozenset({"kernel", "memcpy", "memset"})
LAUNCH_KINDS = frozenset({"runtime", "driver"})

# Device-timeline categories of every accelerator backend, spelled as the profilers write them
# (the reader matches ``cat`` exactly when it picks which args to decode), with the kind each
# maps to. CUDA, ROCm/HIP and XPU share Kineto's lower-case names; 2021-era Kineto wrote them
# capitalised; MTIA writes its device work as ``mtia_ccp_events`` (pid "MTIA N").
DEVICE_CATEGORIES: dict[str, str] = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "Memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
}

# Device events whose category holds more than kernels: MTIA's ``mtia_ccp_events`` are also
# its DMA transfers (copies, with a direction and a size) and stream event records/waits (a
# stream waiting is not a busy device). (cat, name) → kind; the rest of the category keeps
# the kind above.
DEVICE_EVENT_KINDS: dict[tuple[str, str], str] = {
    ("mtia_ccp_events", "dma_request"): "memcpy",
    ("mtia_ccp_events", "event_record"): "sync",
    ("mtia_ccp_events", "event_wait"): "sync",
}

# Kineto `cat` values and the kind each maps to (matched case-insensitively).
KIND_BY_CAT = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "cuda_runtime": "runtime",
    "hip_runtime": "runtime",
    "runtime": "runtime",
    "privateuse1_runtime": "runtime",
    "mtia_runtime": "runtime",
    "xpu_runtime": "runtime",
    "cuda_driver": "driver",
    "hip_driver": "driver",
    "driver": "driver",
    "privateuse1_driver": "driver",
    "python_function": "python",
} | DEVICE_CATEGORIES

# Training steps are recognised by this name on any host category: recent PyTorch writes them
# as user_annotation, 2021-era PyTorch as cpu_op ("Operator"); the loader files both as
# user_annotation so that every analysis sees one kind of step span.
PROFILER_STEP_PREFIX = "ProfilerStep#"

# Columns of `Trace.events`, in order, with their dtypes.
EVENT_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "ts_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.Categorical,
    "cat": pl.Categorical,
    "kind": KIND_DTYPE,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "device": pl.Int64,
    "stream": pl.Int64,
    "correlation": pl.Int64,
    "external_id": pl.Int64,
    "parent": pl.Int64,
    "depth": pl.Int32,
    "step": pl.Int64,
    "input_dims": pl.String,
    "input_types": pl.String,
    "concrete_inputs": pl.String,
    "seq_num": pl.Int64,
    "python_id": pl.Int64,
    "python_parent_id": pl.Int64,
    "launch_kernel": pl.Categorical,
    "bytes": pl.Int64,
    "bandwidth_gbps": pl.Float64,
    "grid": pl.List(pl.Int64),
    "block": pl.List(pl.Int64),
    "registers_per_thread": pl.Int64,
    "shared_memory_bytes": pl.Int64,
    "blocks_per_sm": pl.Float64,
    "warps_per_sm": pl.Float64,
    "occupancy_pct": pl.Float64,
    "collective_name": pl.Categorical,
    "in_msg_nelems": pl.Int64,
    "out_msg_nelems": pl.Int64,
    "group_size": pl.Int64,
    "comm_dtype": pl.Categorical,
    "process_group": pl.String,
    "coll_seq": pl.Int64,
    "wait_on_stream": pl.Int64,
    "wait_on_event_correlation": pl.Int64,
}

# Columns of `Trace.kernels`: GPU work joined to the call that launched it and its host context.
KERNEL_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "id": pl.Int64,
    "ts_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.Categorical,
    "kind": KIND_DTYPE,
    "device": pl.Int64,
    "stream": pl.Int64,
    "correlation": pl.Int64,
    "bytes": pl.Int64,
    "bandwidth_gbps": pl.Float64,
    "grid": pl.List(pl.Int64),
    "block": pl.List(pl.Int64),
    "registers_per_thread": pl.Int64,
    "shared_memory_bytes": pl.Int64,
    "blocks_per_sm": pl.Float64,
    "warps_per_sm": pl.Float64,
    "occupancy_pct": pl.Float64,
    "collective_name": pl.Categorical,
    "in_msg_nelems": pl.Int64,
    "out_msg_nelems": pl.Int64,
    "group_size": pl.Int64,
    "comm_dtype": pl.Categorical,
    "launch_id": pl.Int64,
    "launch_name": pl.Categorical,
    "launch_ts_ns": pl.Int64,
    "launch_end_ns": pl.Int64,
    "launch_tid": pl.Int64,
    "op_id": pl.Int64,
    "op_name": pl.Categorical,
    "top_op_id": pl.Int64,
    "top_op_name": pl.Categorical,
    "annotation_id": pl.Int64,
    "annotation": pl.Categorical,
    "step": pl.Int64,
}

# Columns of `Trace.counters` (Chrome `ph: "C"` events, one row per series value).
COUNTER_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "ts_ns": pl.Int64,
    "pid": pl.Int64,
    "device": pl.Int64,
    "name": pl.Categorical,
    "series": pl.Categorical,
    "value": pl.Float64,
}

# Columns of `Trace.memory` (profile_memory `[memory]` instant events).
MEMORY_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "ts_ns": pl.Int64,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "device_type": pl.Int64,
    "device": pl.Int64,
    "addr": pl.Int64,
    "bytes": pl.Int64,
    "total_allocated_bytes": pl.Int64,
    "total_reserved_bytes": pl.Int64,
}

FRAME_SCHEMAS = {
    "events": EVENT_COLUMNS,
    "kernels": KERNEL_COLUMNS,
    "counters": COUNTER_COLUMNS,
    "memory": MEMORY_COLUMNS,
}


def empty_frame(columns: dict[str, pl.DataType | type[pl.DataType]]) -> pl.DataFrame:
    return pl.DataFrame(schema=columns)
