"""The analyses ``traceinsight analyze`` composes, in report order.

The CLI, the docs and the parametrised tests iterate over ``ANALYSES`` (the single-trace
specs); ``JOB_ANALYSES`` are the ``kind="job"`` specs of the same registry, run over the ranks
of a job. An analysis joins by exposing ``SPEC`` (or ``SPECS``) in its module and being named
here. The specs' ``requires``
are checked when this module loads: an unknown name or a cycle fails at import, not mid-run.
"""

from __future__ import annotations

import importlib
from typing import Any

from traceinsight.analysis.core.base import AnalysisSpec, Spec

_MODULES = (
    "sections.overview",
    "sections.breakdown",
    "sections.gaps",
    "sections.steps",
    "sections.ops",
    "sections.kernels",
    "sections.memory",
    "sections.bound",
    "sections.compile",
    "sections.serving",
    "window.spec",
    "whatif.section",
    "findings.spec",
    # Cross-rank analyses (kind="job"): they take a job's rank summaries in place of a trace.
    "job.specs",
)


class RegistryError(RuntimeError):
    """The registered specs do not form a valid dependency graph, or a module does not load."""


def load_specs(modules: tuple[str, ...]) -> tuple[Spec[Any], ...]:
    """The specs of ``modules`` (names under ``traceinsight.analysis``), in order.

    A module that does not exist or exposes neither ``SPEC`` nor ``SPECS`` is an error at
    import: a misspelled line here must not make an analysis vanish from every report.
    """
    specs: list[Spec[Any]] = []
    for module_name in modules:
        qualified = f"traceinsight.analysis.{module_name}"
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name == qualified:
                raise RegistryError(f"registered analysis module {qualified!r} does not exist") from exc
            raise
        found = getattr(module, "SPECS", None) or ((module.SPEC,) if hasattr(module, "SPEC") else ())
        if not found:
            raise RegistryError(f"registered analysis module {qualified!r} exposes neither SPEC nor SPECS")
        specs.extend(found)
    return tuple(specs)


def topological_order(specs: tuple[Spec[Any], ...]) -> tuple[str, ...]:
    """Names in an order where every analysis follows what it requires (ties: registry order).

    Raises ``RegistryError`` for a duplicate name, an unknown requirement or a cycle.
    """
    by_name: dict[str, Spec[Any]] = {}
    for spec in specs:
        if spec.name in by_name:
            raise RegistryError(f"analysis {spec.name!r} is registered twice")
        by_name[spec.name] = spec
    for spec in specs:
        unknown = [r for r in spec.requires if r not in by_name]
        if unknown:
            raise RegistryError(f"analysis {spec.name!r} requires unknown analysis {', '.join(map(repr, unknown))}")
    order: list[str] = []
    state: dict[str, str] = {}  # "visiting" while on the stack, "done" after

    def visit(name: str, path: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = " -> ".join((*path[path.index(name) :], name))
            raise RegistryError(f"analyses require each other in a cycle: {cycle}")
        state[name] = "visiting"
        for required in by_name[name].requires:
            visit(required, (*path, name))
        state[name] = "done"
        order.append(name)

    for spec in specs:
        visit(spec.name, ())
    return tuple(order)


def closure(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``names`` and everything they require, transitively, in run (topological) order."""
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name not in wanted:
            wanted.add(name)
            stack.extend(get(name).requires)
    return tuple(n for n in RUN_ORDER if n in wanted)


# Every registered spec, single-trace and job alike: one registry, one dependency graph.
SPECS: tuple[Spec[Any], ...] = load_specs(_MODULES)
RUN_ORDER: tuple[str, ...] = topological_order(SPECS)
# The single-trace view, what ``analyze TRACE`` runs and shows.
ANALYSES: tuple[AnalysisSpec, ...] = tuple(s for s in SPECS if s.kind == "trace")
# The job view, what ``analyze`` runs over the ranks of a job (``analysis.job_runner``).
JOB_ANALYSES: tuple[Spec[Any], ...] = tuple(s for s in SPECS if s.kind == "job")


def get(name: str) -> Spec[Any]:
    for spec in SPECS:
        if spec.name == name:
            return spec
    raise KeyError(name)
