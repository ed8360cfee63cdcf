"""What is in the trace: devices, the analysed window, event counts, steps, GPU busy share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.lib import intervals
from traceinsight.analysis.lib.graph_capture import GRAPH_NODE_TID
from traceinsight.analysis.lib.host_names import gpu_work_calls
from traceinsight.analysis.lib.timeline import analysis_window, busy_intervals, work_intervals
from traceinsight.trace.model import Trace


@dataclass(frozen=True)
class DeviceOverview:
    device: int
    name: str | None
    kernels: int
    busy_ns: int
    window_ns: int
    busy_pct: float


@dataclass(frozen=True)
class OverviewResult(Result):
    name = "overview"
    path: str = ""
    file_bytes: int = 0
    window_start_ns: int = 0
    window_end_ns: int = 0
    window_ns: int = 0
    counts_by_kind: dict[str, int] = field(default_factory=dict)
    steps: tuple[int, ...] = ()
    # how the steps were found: "ProfilerStep", "repeated span NAME", "repeated call NAME",
    # "periodic kernels"
    step_source: str | None = None
    prefill_steps: tuple[int, ...] = ()
    devices: tuple[DeviceOverview, ...] = ()
    counters: int = 0
    memory_events: int = 0
    has_shapes: bool = False
    has_stack: bool = False
    warnings: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    distributed: dict[str, Any] | None = None
    # graph replays merged with their capture trace(s): what was matched (see docs/inference.md)
    graph_capture: dict[str, Any] | None = None
    # host calls that put work on a GPU (launches, async copies) in a trace without GPU work:
    # the GPU's activity was not recorded (0 when the trace has GPU work)
    unrecorded_gpu_calls: int = 0

    def to_polars(self) -> pl.DataFrame:
        return pl.DataFrame(
            [d.__dict__ for d in self.devices],
            schema={
                "device": pl.Int64,
                "name": pl.String,
                "kernels": pl.Int64,
                "busy_ns": pl.Int64,
                "window_ns": pl.Int64,
                "busy_pct": pl.Float64,
            },
        )


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> OverviewResult:
    events = trace.events
    lo, hi = analysis_window(trace)
    window = max(hi - lo, 0)
    counts = {
        str(row["kind"]): int(row["len"])
        # the ops a merged capture added for graph nodes are not events of this trace
        for row in events.select("tid", "kind").filter(pl.col("tid") != GRAPH_NODE_TID).group_by("kind").len()
        # Ties by name: group_by's order is not stable between runs.
        .sort([pl.col("len"), pl.col("kind").cast(pl.String)], descending=[True, False]).iter_rows(named=True)
    }
    steps = tuple(
        int(s) for s in events.get_column("step").drop_nulls().unique().sort().to_list()
    )
    work = work_intervals(trace)
    busy_by_device = intervals.total_ns(busy_intervals(trace), by=["device"])
    assert isinstance(busy_by_device, pl.DataFrame)
    kernel_counts = dict(work.group_by("device").len().iter_rows())
    devices = []
    for device, busy_ns in busy_by_device.iter_rows():
        props = trace.meta.device(int(device))
        devices.append(
            DeviceOverview(
                device=int(device),
                name=props.name if props else None,
                kernels=int(kernel_counts.get(device, 0)),
                busy_ns=int(busy_ns),
                window_ns=window,
                busy_pct=100.0 * busy_ns / window if window else 0.0,
            )
        )
    return OverviewResult(
        path=trace.meta.path,
        file_bytes=trace.meta.file_bytes,
        window_start_ns=lo,
        window_end_ns=hi,
        window_ns=window,
        counts_by_kind=counts,
        steps=steps,
        step_source=trace.step_source if steps else None,
        prefill_steps=trace.prefill_steps,
        devices=tuple(devices),
        counters=trace.counters.height,
        memory_events=trace.memory.height,
        has_shapes=trace.has_shapes,
        has_stack=counts.get("python", 0) > 0,
        warnings=trace.meta.warnings,
        versions=trace.meta.versions,
        distributed=trace.meta.distributed,
        graph_capture=trace.meta.graph_capture,
        unrecorded_gpu_calls=0 if trace.has_gpu else int(gpu_work_calls(events)["calls"].sum() or 0),
    )


SPEC = AnalysisSpec(
    name="overview",
    title="Trace overview",
    run=run,
    description="Devices, analysed window, event counts by kind, steps and GPU busy share.",
)
