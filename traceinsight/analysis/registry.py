"""The analyses ``traceinsight analyze`` composes, in report order.

The CLI, the docs and the parametrised tests iterate over ``ANALYSES``; an analysis joins
the report by exposing ``SPEC`` in its module and being named here.
"""

from __future__ import annotations

import importlib

from traceinsight.analysis.base import AnalysisSpec

_MODULES = (
    "overview",
    "breakdown",
    "gaps",
    "steps",
    "ops",
    "kernels",
    "memory",
    "bound",
    "compile",
)


def _load() -> tuple[AnalysisSpec, ...]:
    specs = []
    for module_name in _MODULES:
        qualified = f"traceinsight.analysis.{module_name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                continue  # not part of this build
            raise
        specs.append(module.SPEC)
    return tuple(specs)


ANALYSES: tuple[AnalysisSpec, ...] = _load()


def get(name: str) -> AnalysisSpec:
    for spec in ANALYSES:
        if spec.name == name:
            return spec
    raise KeyError(name)
