"""The loaded trace: frozen polars frames plus what the file says about itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceinsight.trace.schema import FRAME_SCHEMAS

if TYPE_CHECKING:
    from traceinsight.trace.iterations import Iterations


@dataclass(frozen=True)
class DeviceProperties:
    """One entry of Kineto's ``deviceProperties``; ``raw`` keeps every field the file had."""

    id: int
    name: str
    total_global_mem_bytes: int | None = None
    num_sms: int | None = None
    compute_major: int | None = None
    compute_minor: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def compute_capability(self) -> str | None:
        if self.compute_major is None or self.compute_minor is None:
            return None
        return f"{self.compute_major}.{self.compute_minor}"


@dataclass(frozen=True)
class UnprofiledSteps:
    """Steps the recording program ran without the profiler, timed by capture (written into
    the trace by ``traceinsight capture`` / ``profile()``): the program's own step.

    ``step``: the schedule's step index of each (0 is the run's first); ``wall_ns``: host time
    between ``step()`` calls; ``device_ns``: CUDA-event time between them on the current
    stream (None where not timed; empty without CUDA); ``timing``: how each was taken."""

    step: tuple[int, ...]
    wall_ns: tuple[int, ...]
    device_ns: tuple[int | None, ...] = ()
    timing: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def parse(data: Any) -> UnprofiledSteps | None:
        """From the trace's metadata; None when absent or not as capture writes it."""
        if not isinstance(data, dict):
            return None
        step, wall, device = data.get("step"), data.get("wall_ns"), data.get("device_ns", [])
        timing = data.get("timing", {})
        if not (isinstance(step, (list, tuple)) and isinstance(wall, (list, tuple)) and isinstance(device, (list, tuple))):
            return None
        if not isinstance(timing, dict):
            return None
        if not step or len(wall) != len(step) or (device and len(device) != len(step)):
            return None
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in [*step, *wall]):
            return None
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in device):
            return None
        return UnprofiledSteps(
            step=tuple(step), wall_ns=tuple(wall), device_ns=tuple(device), timing={str(k): str(v) for k, v in timing.items()}
        )


@dataclass(frozen=True)
class TraceMeta:
    path: str
    file_bytes: int
    schema_version: Any = None
    base_time_ns: int | None = None
    devices: tuple[DeviceProperties, ...] = ()
    distributed: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    profiler_options: dict[str, Any] = field(default_factory=dict)
    capture: dict[str, Any] | None = None
    trace_id: str | None = None
    host_name: str | None = None
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)
    pid_labels: dict[int, str] = field(default_factory=dict)
    phase_counts: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    from_cache: bool = False
    # Without ProfilerStep spans: the loop's iterations (traceinsight.trace.iterations.Iterations.to_dict)
    iterations: dict[str, Any] | None = None
    # Graph replays merged with their capture trace(s) (analysis.lib.graph_capture.CaptureMerge.to_dict)
    graph_capture: dict[str, Any] | None = None
    # Steps capture timed without the profiler (None: not recorded; third-party traces)
    unprofiled_steps: UnprofiledSteps | None = None

    @property
    def rank(self) -> int | None:
        if not self.distributed:
            return None
        rank = self.distributed.get("rank")
        return rank if isinstance(rank, int) else None

    def device(self, index: int) -> DeviceProperties | None:
        for dev in self.devices:
            if dev.id == index:
                return dev
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["process_names"] = {str(k): v for k, v in self.process_names.items()}
        data["pid_labels"] = {str(k): v for k, v in self.pid_labels.items()}
        data["warnings"] = list(self.warnings)
        data["devices"] = [asdict(d) for d in self.devices]
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TraceMeta:
        data = dict(data)
        data["devices"] = tuple(DeviceProperties(**d) for d in data.get("devices", ()))
        data["process_names"] = {int(k): v for k, v in data.get("process_names", {}).items()}
        data["pid_labels"] = {int(k): v for k, v in data.get("pid_labels", {}).items()}
        data["warnings"] = tuple(data.get("warnings", ()))
        data["unprofiled_steps"] = UnprofiledSteps.parse(data.get("unprofiled_steps"))
        return TraceMeta(**data)


@dataclass(frozen=True)
class Trace:
    """A Kineto trace as polars frames. Times are Int64 ns relative to ``meta.base_time_ns``.

    - ``events``: every duration event, one row each, nested per host thread.
    - ``kernels``: GPU kernels, memcpys and memsets with their launch call and host context.
    - ``counters``: Chrome counter samples (NVML/GPM samples from capture land here).
    - ``memory``: profile_memory allocation events.
    """

    events: pl.DataFrame
    kernels: pl.DataFrame
    counters: pl.DataFrame
    memory: pl.DataFrame
    meta: TraceMeta

    FRAMES = tuple(FRAME_SCHEMAS)

    def frame(self, name: str) -> pl.DataFrame:
        if name not in FRAME_SCHEMAS:
            raise KeyError(f"unknown frame {name!r}; choose from {', '.join(FRAME_SCHEMAS)}")
        frame: pl.DataFrame = getattr(self, name)
        return frame

    def to_pandas(self, name: str = "events") -> Any:
        """One of the frames as a pandas DataFrame (for notebooks)."""
        return self.frame(name).to_pandas()

    def sql(self, query: str) -> pl.DataFrame:
        """Run polars SQL over the frames, which are the tables ``events``, ``kernels``, ...

        Categorical columns are handed to SQL as plain strings, so that LIKE, string
        functions and comparisons behave as in any SQL database.
        """
        import polars.selectors as cs

        tables = {
            name: self.frame(name).lazy().with_columns(cs.categorical().cast(pl.String))
            for name in FRAME_SCHEMAS
        }
        result: pl.DataFrame = pl.SQLContext(tables, eager=True).execute(query)
        return result

    def step_spans(self) -> pl.DataFrame:
        """Step host spans: step, host_start_ns, host_end_ns, sorted by start.

        ProfilerStep#N spans; without any, the loop iterations found at load
        (:mod:`traceinsight.trace.iterations`), whose events carry the same ``step`` column.
        """
        from traceinsight.trace.link import step_spans

        spans = step_spans(self.events)
        iterations = self.iterations
        if spans.height or iterations is None:
            return spans
        return iterations.spans

    @property
    def iterations(self) -> Iterations | None:
        """The loop iterations standing in for steps in a trace without ProfilerStep spans."""
        from traceinsight.trace.iterations import Iterations

        data = self.meta.iterations
        return Iterations.from_dict(data) if data else None

    @property
    def step_source(self) -> str | None:
        """How the steps were found: ``ProfilerStep``, ``repeated span NAME``, ``repeated call
        NAME``, ``periodic kernels``, or None without steps."""
        from traceinsight.trace.link import step_spans

        if step_spans(self.events).height:
            return "ProfilerStep"
        iterations = self.iterations
        return iterations.label if iterations is not None else None

    @property
    def prefill_steps(self) -> tuple[int, ...]:
        """Iterations labelled prefill (first of a run, far more GPU work than the median)."""
        iterations = self.iterations
        return iterations.prefill if iterations is not None else ()

    @property
    def gpu_devices(self) -> list[int]:
        return sorted(d for d in self.kernels["device"].unique().to_list() if d is not None)

    @property
    def has_gpu(self) -> bool:
        return self.kernels.height > 0

    @property
    def has_shapes(self) -> bool:
        return bool(self.events["input_dims"].is_not_null().any())

    @property
    def has_steps(self) -> bool:
        return bool(self.events["step"].is_not_null().any())

    def __repr__(self) -> str:
        return (
            f"Trace({self.meta.path!r}, events={self.events.height}, kernels={self.kernels.height}, "
            f"counters={self.counters.height}, memory={self.memory.height})"
        )
