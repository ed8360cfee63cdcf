"""What the detectors read: the trace, the results it already has, and shared helpers.

Every result is optional: a detector whose inputs are missing or unavailable returns None.
The few figures no result holds (python stack locations, dtypes of an op's inputs, runtime
calls by name, memcpy kinds by op) are read here from the trace's frames with cheap filters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Result
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.read.steady import (
    excluded_busy_ns,
    excluded_idle_ns,
    steady_gaps,
)
from traceinsight.analysis.findings.read.syncs import SYNC_GAP_SCHEMA, sync_opened_gaps
from traceinsight.analysis.findings.read.workload import Workload
from traceinsight.analysis.findings.read.workload import detect as detect_workload
from traceinsight.analysis.sections.bound import BoundResult
from traceinsight.analysis.sections.breakdown import BreakdownResult
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.analysis.sections.kernels import KernelsResult
from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.analysis.sections.ops import OpsResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.trace.model import Trace

R = TypeVar("R", bound=Result)

# Python frames that are not the user's code: the innermost frame outside them is reported.
_LIBRARY_FRAME = re.compile(
    r"(^<built-in|^<frozen|^nn\.Module:|^torch/|/torch/|site-packages|dist-packages|"
    r"^threading\.py|/threading\.py|^contextlib\.py|traceinsight/capture|^\w+\.py\(\d+\): __call__$)"
)
_FRAME = re.compile(r"^(.*?)\((\d+)\): (.*)$")
# Public names for the detectors that read Python frames themselves.
LIBRARY_FRAME, FRAME = _LIBRARY_FRAME, _FRAME
# Host annotations of torch.compile's own machinery: never shown as the thing to fix.
DYNAMO_INTERNAL = re.compile(
    r"(?i)(^TorchDynamo|dynamo|^Torch-Compiled Region|^CompiledFunction|^## Call CompiledFxGraph|"
    r"^AOTDispatcher|^Pregraph bytecode|^OutputGraph|compile_inner|AOTAutogradCache|inductor)"
)


def _usable(result: R | None) -> R | None:
    return result if result is not None and result.available else None


@dataclass(frozen=True)
class FindingContext:
    trace: Trace
    gaps: GapsResult | None = None
    breakdown: BreakdownResult | None = None
    steps: StepsResult | None = None
    ops: OpsResult | None = None
    kernels: KernelsResult | None = None
    bound: BoundResult | None = None
    memory: MemoryResult | None = None
    compile: CompileResult | None = None
    config: AnalysisConfig | None = None  # the user's peak overrides reach the device model
    # The window assessment. What it finds not steady state (start-up, capture) is left out:
    # ``gaps`` becomes the gaps outside those spans, and the window and idle time shrink by
    # them (``excluded_window_ns``, ``excluded_idle_ns``), so savings are of the steady state.
    window: WindowResult | None = None
    excluded_window_ns: int = 0
    excluded_idle_ns: int = 0
    excluded_busy_ns: dict[str, int] = field(default_factory=dict)
    # Savings of findings that carry transformations from the replayed graph where the trace
    # replays (``findings.price.replayed``); False: the pool estimates only.
    replay: bool = True
    # Price on the un-profiled step where the window has one (``findings.price.clock``); False: on the
    # traced step.
    clock: bool = True

    def __post_init__(self) -> None:
        for name in ("gaps", "breakdown", "steps", "ops", "kernels", "bound", "memory", "compile", "window"):
            object.__setattr__(self, name, _usable(getattr(self, name)))
        if self.window is not None and self.window.excluded.height and self.gaps is not None:
            idle = excluded_idle_ns(self.trace, self.window.excluded, self.trace.gpu_devices)
            object.__setattr__(self, "excluded_window_ns", self.window.excluded_ns)
            object.__setattr__(self, "excluded_idle_ns", idle)
            object.__setattr__(self, "excluded_busy_ns", excluded_busy_ns(self.trace, self.window.excluded))
            object.__setattr__(self, "gaps", steady_gaps(self.gaps, self.window.excluded, idle, max(self.gaps.top.height, 1)))

    # -- denominators -------------------------------------------------------------------
    @property
    def full_window_ns(self) -> int:
        """The breakdown's (and gaps') window, one-time spans included."""
        if self.breakdown is not None and self.breakdown.window_ns > 0:
            return self.breakdown.window_ns
        if self.gaps is not None:
            return self.gaps.window_ns
        return 0

    @property
    def window_ns(self) -> int:
        """The analysed time every share is of: the window without the spans the window
        assessment finds not steady state (all of it when nothing would be left)."""
        full = self.full_window_ns
        return full - self.excluded_window_ns if self.excluded_window_ns < full else full

    @property
    def step_count(self) -> int:
        return 0 if self.steps is None else self.steps.steps.height

    @property
    def steady_step_count(self) -> int:
        """The steps ``step_ns`` is the mean of: the warm-up step left out when there are others."""
        if self.steps is None or self.steps.steps.height == 0:
            return 0
        steady = int((~self.steps.steps["is_warmup"]).sum())
        return steady if steady > 0 else self.steps.steps.height

    @property
    def step_ns(self) -> int | None:
        """Mean device time of a step, the warm-up step left out when there are others."""
        if self.steps is None or self.steps.steps.height == 0:
            return None
        steps = self.steps.steps
        steady = steps.filter(~pl.col("is_warmup"))
        use = steady if steady.height > 0 else steps
        mean = use["device_dur_ns"].mean()
        return int(mean) if isinstance(mean, (int, float)) and mean > 0 else None

    @property
    def rank(self) -> int | None:
        return self.trace.meta.rank

    @cached_property
    def device(self) -> device_model.DeviceModel:
        """What the busiest device can do (the same model the bound analysis prices with)."""
        return device_model.from_trace(self.trace, self.config)

    @cached_property
    def workload(self) -> Workload:
        """Training, inference or decoding: which advice applies (see .workload)."""
        return detect_workload(self.trace)

    def peak_tflops(self, dtype_class: str) -> float | None:
        """The device's dense peak for a compute class (its table's fallbacks included, so
        TF32 is never borrowed where the part has none); None on an unknown device."""
        peaks = self.device.peaks
        value = peaks.peak_tflops(dtype_class) if peaks is not None else None
        return float(value) if value and value > 0 else None

    @property
    def mem_bw_tbps(self) -> float | None:
        value = self.device.mem_bw_tbps
        return float(value) if value and value > 0 else None

    # -- pools of device time (what a fix can give back at most) ------------------------
    def category_ns(self, *categories: str) -> int:
        if self.breakdown is None:
            return 0
        rows = self.breakdown.by_device.filter(pl.col("category").is_in(list(categories)))
        total = int(rows["dur_ns"].sum())
        # Time inside the spans left out as not steady state is no fix's to give back.
        if categories == ("idle",):
            return max(total - self.excluded_idle_ns, 0)
        return max(total - sum(self.excluded_busy_ns.get(c, 0) for c in categories), 0)

    def idle_by_cause(self, cause: str) -> int:
        if self.gaps is None:
            return 0
        return int(self.gaps.by_cause.filter(pl.col("cause") == cause)["idle_ns"].sum())

    @cached_property
    def sync_gaps(self) -> pl.DataFrame:
        """Gaps opened by a host synchronisation, with the saving each allows (see .syncs)."""
        if self.gaps is None:
            return pl.DataFrame(schema=SYNC_GAP_SCHEMA)
        return sync_opened_gaps(self.trace, self.gaps.gaps)

    # -- evidence read from the frames --------------------------------------------------
    def locations_of(self, op_names: list[str], limit: int = 3) -> tuple[str, ...]:
        """``file:line`` of the innermost user Python frame around calls of these ops.

        Needs ``with_stack=True`` (python_function events); empty otherwise. The frames are
        matched by time on the op's thread: the innermost non-library frame enclosing it.
        """
        events = self.trace.events
        if not op_names or not bool((events["kind"] == "python").any()):
            return ()
        py = (
            events.filter(pl.col("kind") == "python")
            .select("pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String))
            .filter(~pl.col("name").str.contains(_LIBRARY_FRAME.pattern))
        )
        calls = (
            events.filter(
                (pl.col("kind") == "cpu_op") & pl.col("name").cast(pl.String).is_in(op_names)
            )
            .select("pid", "tid", pl.col("ts_ns").alias("op_ts"), pl.col("end_ns").alias("op_end"))
            .unique(["pid", "tid", "op_ts"], maintain_order=True)
            .head(200)
        )
        if calls.height == 0 or py.height == 0:
            return ()
        enclosing = (
            calls.join(py, on=["pid", "tid"])
            .filter((pl.col("ts_ns") <= pl.col("op_ts")) & (pl.col("end_ns") >= pl.col("op_end")))
            .sort(["ts_ns", "end_ns", "name"], descending=[True, False, False])
            .group_by("pid", "tid", "op_ts", maintain_order=True)
            .first()
        )
        counted = enclosing.group_by("name").len().sort(["len", "name"], descending=[True, False])
        out: list[str] = []
        for name in counted["name"].to_list():
            match = _FRAME.match(name)
            out.append(f"{match.group(1)}:{match.group(2)}" if match else name)
            if len(out) >= limit:
                break
        return tuple(out)

    def op_dtypes(self, name: str, shapes: str | None) -> str | None:
        """The recorded input dtypes of an op with these input dims (first call's)."""
        ev = self.trace.events.select("kind", "name", "input_dims", "input_types")
        filt = (pl.col("kind") == "cpu_op") & (pl.col("name").cast(pl.String) == name)
        if shapes is not None:
            filt = filt & (pl.col("input_dims") == shapes)
        rows = ev.filter(filt).select("input_types").drop_nulls().head(1)
        return None if rows.height == 0 else str(rows["input_types"][0])
