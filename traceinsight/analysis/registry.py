"""The single-trace analyses ``traceinsight analyze`` composes, in report order.

The CLI, the docs and the parametrised tests iterate over ``ANALYSES``. An analysis joins by
exposing ``SPEC`` (or ``SPECS``) in its module and being imported and named here: one import
and one entry of the ``specs_of`` call. The job analyses have their own registry
(``analysis/job/specs.py``), above this one: a job's ranks are summarised by ``analyze``.
"""

from __future__ import annotations

from typing import Any

from traceinsight.analysis.core.base import AnalysisSpec, Spec
from traceinsight.analysis.core.registry import Catalog, specs_of
from traceinsight.analysis.findings import spec as findings
from traceinsight.analysis.sections import (
    bound,
    breakdown,
    compile,
    gaps,
    kernels,
    memory,
    ops,
    overview,
    serving,
    steps,
)
from traceinsight.analysis.whatif import section as critical_path
from traceinsight.analysis.window import spec as window

CATALOG = Catalog(
    specs_of(
        overview,
        breakdown,
        gaps,
        steps,
        ops,
        kernels,
        memory,
        bound,
        compile,
        serving,
        window,
        critical_path,
        findings,
    )
)
ANALYSES: tuple[AnalysisSpec, ...] = tuple(s for s in CATALOG.specs if s.kind == "trace")
RUN_ORDER: tuple[str, ...] = CATALOG.run_order


def get(name: str) -> Spec[Any]:
    return CATALOG.get(name)


def closure(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``names`` and everything they require, transitively, in run (topological) order."""
    return CATALOG.closure(names)
