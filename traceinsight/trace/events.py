"""The event structs: a msgspec union tagged by ``ph``, each phase with only the fields it needs.

Events are decoded as this union, so flow events (a third of a typical trace) cost almost
nothing, and their args are decoded in the same pass into one struct that names only the
fields the analyses use.
"""

from __future__ import annotations

from typing import Any, ClassVar, Union

import msgspec


class EventArgs(msgspec.Struct, gc=False):
    """The args fields the analyses use, of every kind of event, decoded with the event.

    One struct for all kinds, so the events array is decoded in a single pass; which of
    these fields become columns depends on the event's cat (see the field groups in
    :mod:`traceinsight.trace.columns`). Shapes and types stay raw JSON text.
    """

    # every host event that links to others
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    # cpu ops
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="Concrete Inputs")
    seq_num: int | None = msgspec.field(default=None, name="Sequence number")
    # Python frames
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    # launch calls: the kernel launched (ROCm writes it; during a graph capture it is the only
    # record of what each graph node runs)
    launch_kernel: str | None = msgspec.field(default=None, name="kernel")
    # GPU work
    device: int | None = None
    stream: int | None = None
    grid: list[int] | None = None
    block: list[int] | None = None
    registers_per_thread: int | None = msgspec.field(default=None, name="registers per thread")
    shared_memory_bytes: int | None = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: float | None = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: float | None = msgspec.field(default=None, name="warps per SM")
    occupancy_pct: float | None = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: int | None = None
    bandwidth_gbps: float | None = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    # NCCL collectives, on the host op (record_param_comms) and on the GPU kernel
    collective_name: str | None = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    comm_dtype: str | None = msgspec.field(default=None, name="dtype")
    process_group: str | None = msgspec.field(default=None, name="Process Group Name")
    # the collective's sequence number in its process group (recent Kineto): the same on every
    # rank of the group, so it matches a collective across ranks
    coll_seq: int | None = msgspec.field(default=None, name="Seq")
    # cuda_sync "Stream Wait Event": the stream waited on, and (recent Kineto) the correlation
    # of the cudaEventRecord whose event is waited on
    wait_on_stream: int | None = None
    wait_on_event_correlation: int | None = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")
    # profile_memory "[memory]" instant events
    memory_device_type: int | None = msgspec.field(default=None, name="Device Type")
    memory_device: int | None = msgspec.field(default=None, name="Device Id")
    memory_addr: int | None = msgspec.field(default=None, name="Addr")
    memory_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated_bytes: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved_bytes: int | None = msgspec.field(default=None, name="Total Reserved")


# Events are decoded as a union tagged by "ph", so each phase gets only the fields it needs
# and flow events (a third of a typical trace) cost almost nothing.
class DurationEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    PH: ClassVar[str] = "X"
    name: str | None = None
    cat: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: EventArgs = msgspec.field(default_factory=EventArgs)


class BeginEvent(DurationEvent, tag="B", gc=False):
    PH: ClassVar[str] = "B"


class EndEvent(DurationEvent, tag="E", gc=False):
    PH: ClassVar[str] = "E"


class InstantEvent(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    PH: ClassVar[str] = "i"
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    args: EventArgs | None = None


class GlobalInstantEvent(InstantEvent, tag="I", gc=False):
    PH: ClassVar[str] = "I"


class AsyncInstantEvent(InstantEvent, tag="n", gc=False):
    PH: ClassVar[str] = "n"


class CounterEvent(msgspec.Struct, tag_field="ph", tag="C", gc=False):
    PH: ClassVar[str] = "C"
    name: str | None = None
    pid: int | str | None = None
    ts: float | None = None
    args: Any = None


class MetadataEvent(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    PH: ClassVar[str] = "M"
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    args: Any = None


class UnknownEvent(msgspec.Struct, gc=False):
    """An entry the lenient path could not place; PH holds its phase as written."""

    PH: str = ""


def _skipped(phase: str) -> type[msgspec.Struct]:
    """A struct for a phase we only count (flows, async, objects, samples, marks...)."""
    return msgspec.defstruct(
        f"_Skipped_{ord(phase)}", [], tag_field="ph", tag=phase, gc=False, namespace={"PH": phase}
    )


EVENT_TYPES: tuple[type[msgspec.Struct], ...] = (
    DurationEvent,
    BeginEvent,
    EndEvent,
    InstantEvent,
    GlobalInstantEvent,
    AsyncInstantEvent,
    CounterEvent,
    MetadataEvent,
    *(_skipped(phase) for phase in "stfbeSTpFPONDRcVv()"),
)
STRUCT_BY_PHASE: dict[str, type[Any]] = {t.PH: t for t in EVENT_TYPES}  # type: ignore[attr-defined]
EVENTS_TYPE = list[Union[EVENT_TYPES]]  # type: ignore[valid-type]  # noqa: UP007
