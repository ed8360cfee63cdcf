"""How a registry of analyses is checked and read: the specs of the modules it names, their
run order, the closure of a set of names.

The registries themselves name their modules by static import, so that every edge is an
import the checks see: ``analysis/registry.py`` the single-trace analyses (what ``analyze
TRACE`` runs), ``analysis/job/specs.py`` the job analyses. A registry's ``requires`` are
checked when it is built: an unknown name or a cycle fails at import, not mid-run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from traceinsight.analysis.core.base import Spec


class RegistryError(RuntimeError):
    """The registered specs do not form a valid dependency graph, or a module has no spec."""


def specs_of(*modules: ModuleType) -> tuple[Spec[Any], ...]:
    """The specs ``modules`` expose (``SPEC`` or ``SPECS``), in order; a module with neither is
    an error at import, not an analysis that silently vanishes from every report."""
    specs: list[Spec[Any]] = []
    for module in modules:
        found = getattr(module, "SPECS", None) or ((module.SPEC,) if hasattr(module, "SPEC") else ())
        if not found:
            raise RegistryError(f"registered analysis module {module.__name__!r} exposes neither SPEC nor SPECS")
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


@dataclass(frozen=True)
class Catalog:
    """One registry: its specs in registry order, checked (names unique, requirements known, no
    cycle) when it is made."""

    specs: tuple[Spec[Any], ...]
    run_order: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_order", topological_order(self.specs))

    def get(self, name: str) -> Spec[Any]:
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def closure(self, names: Iterable[str]) -> tuple[str, ...]:
        """``names`` and everything they require, transitively, in run (topological) order."""
        wanted: set[str] = set()
        stack = list(names)
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack.extend(self.get(name).requires)
        return tuple(n for n in self.run_order if n in wanted)
