"""What every analysis shares: its config, the result contract, and JSON-safe conversion."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any, ClassVar, Generic, Literal, TypeVar

import polars as pl

from traceinsight.analysis.core import display
from traceinsight.trace.model import Trace

RESULT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class AnalysisConfig:
    """Knobs shared by all analyses; each reads the ones it needs."""

    gap_threshold_ns: int = 10_000
    top_n: int = 10
    by_shapes: bool = False
    peak_tflops: float | None = None
    peak_bw_tbps: float | None = None
    devices_toml: str | None = None
    # The step findings are priced on: "auto" (the un-profiled step where the window has one,
    # recorded or estimated) or "traced" (the profiled timeline as it is).
    clock: str = "auto"


@dataclass(frozen=True)
class Result:
    """Base of every analysis result.

    ``available`` is False (with ``reason``) when the trace lacks what the analysis needs;
    such a result still renders and serialises, it just says why it has nothing to show.
    Subclasses add frames and figures; ``to_dict`` turns all of it into JSON-safe data.
    """

    name: ClassVar[str] = "result"
    available: bool = True
    reason: str | None = None

    def to_polars(self) -> pl.DataFrame:
        """The main table of this result (an empty frame when there is none)."""
        return pl.DataFrame()

    def to_pandas(self) -> Any:
        return self.to_polars().to_pandas()

    def _repr_html_(self) -> str:
        """Rich display in Jupyter: the same view as the HTML report's section."""
        return display.render("result_html", self)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION}
        for f in fields(self):
            data[f.name] = jsonable(getattr(self, f.name))
        return data


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: NaN/inf become None, frames become lists of row dicts."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, pl.DataFrame):
        return [jsonable(row) for row in value.to_dicts()]
    if isinstance(value, pl.Series):
        return [jsonable(v) for v in value.to_list()]
    if isinstance(value, Result):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


R = TypeVar("R", bound=Result)


class Inputs:
    """The already computed results an analysis asked for (its spec's ``requires``).

    Every analysis takes them the same way: ``run(trace, config, inputs=NO_INPUTS)``. The
    runner passes them; :func:`traceinsight.analysis.runner.compute_inputs` computes them
    for a direct call.

    ``get`` and ``maybe`` check the type, so a result read under the wrong name or class fails
    loudly instead of yielding ``None`` fields downstream.
    """

    def __init__(self, results: Mapping[str, Result] | None = None) -> None:
        self._results: dict[str, Result] = dict(results or {})

    def __contains__(self, name: object) -> bool:
        return name in self._results

    def names(self) -> tuple[str, ...]:
        return tuple(self._results)

    def get(self, name: str, cls: type[R]) -> R:
        result = self.maybe(name, cls)
        if result is None:
            raise LookupError(f"analysis input {name!r} was not computed (missing from the spec's requires?)")
        return result

    def maybe(self, name: str, cls: type[R]) -> R | None:
        result = self._results.get(name)
        if result is None:
            return None
        if not isinstance(result, cls):
            raise TypeError(f"analysis input {name!r} is a {type(result).__name__}, not a {cls.__name__}")
        return result


# What a direct call of an analysis gets when no inputs are given: an analysis reads each
# requirement with ``inputs.maybe`` and says what it could not do without it. The runner
# (``analysis.runner.run_one`` / ``compute_inputs``) computes requirements.
NO_INPUTS = Inputs()


InputT = TypeVar("InputT")


@dataclass(frozen=True)
class Spec(Generic[InputT]):
    """One registered analysis: its section name, a title for people, and the function.

    ``run`` takes what the analysis reads (``InputT``: a trace, or a job's rank summaries),
    the config and its ``Inputs``. ``requires`` names the analyses whose results ``run`` reads
    from its ``Inputs``; the runner computes them first, each once. ``kind="job"`` marks an
    analysis over several traces (the ranks of one run, or a series of runs); the
    single-trace runner skips those.
    """

    name: str
    title: str
    run: Callable[[InputT, AnalysisConfig, Inputs], Result]
    requires: tuple[str, ...] = ()
    description: str = ""
    kind: Literal["trace", "job"] = "trace"


# A single-trace analysis; the job analyses' spec type is ``job.specs.JobAnalysisSpec``.
AnalysisSpec = Spec[Trace]
