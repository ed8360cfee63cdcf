"""The package's structure: no import cycles, no module over 500 lines, every registered
analysis and view module loads, and a misspelled registry line fails loudly.

The import graph is read from the source (every ``import`` a module can execute, at module
level or inside functions; imports under ``if TYPE_CHECKING:`` never run and are left out).
Importing ``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first, unless the importer is
itself inside them (then they ran before it): so it is an edge to ``a.b.c`` and to each of its
parent packages that is not a parent of the importer. A cycle that goes through a package's
``__init__`` (``pkg/__init__`` imports ``pkg.a``, which imports ``x``, which imports ``pkg.b``:
importing ``x`` first runs ``pkg/__init__``, which re-enters ``x`` half-built) is found like any
other. A module that
imports by name (``importlib.import_module``, ``__import__``) gets an edge to every module a
dotted string in it names (a package's name: the package and every module under it), and, for
an f-string such as ``f"pkg.{name}"``, to every module under its literal prefix: an import the
static checks cannot see is still an edge here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "traceinsight"
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, modules: set[str], here: str, is_package: bool) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".") if is_package else here.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    found.add(target)
                elif base in modules:
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found |= _by_name(tree, modules)
    found.discard(here)
    return found


def _imports_by_name(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
            if name in ("import_module", "__import__"):
                return True
    return False


def _by_name(tree: ast.AST, modules: set[str]) -> set[str]:
    """The modules a module that imports by name may reach: every string naming one, every
    module under an f-string's literal prefix."""
    if not _imports_by_name(tree):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value and node.value in modules:
            found.add(node.value)
            found.update(m for m in modules if m.startswith(node.value + "."))
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.endswith("."):
                prefix = first.value
                found.update(m for m in modules if m.startswith(prefix))
    return found


def _parents(name: str, modules: set[str]) -> set[str]:
    parts = name.split(".")
    return {p for i in range(1, len(parts)) if (p := ".".join(parts[:i])) in modules}


def through_packages(here: str, targets: set[str], modules: set[str]) -> set[str]:
    """The package ``__init__``s that importing ``targets`` from ``here`` runs: each target's
    parent packages, less ``here``'s own (already run before ``here`` was)."""
    own = _parents(here, modules)
    found = set().union(*(_parents(t, modules) for t in targets)) - own
    found.discard(here)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    direct = {
        name: _imports(ast.parse(path.read_text(encoding="utf-8")), modules, name, path.name == "__init__.py")
        for name, path in paths.items()
    }
    return {name: targets | through_packages(name, targets, modules) for name, targets in direct.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_imports_by_name_are_edges() -> None:
    modules = {"pkg.a", "pkg.views.x", "pkg.views.y", "pkg.other"}
    literal = ast.parse("import importlib\ndef f():\n    importlib.import_module('pkg.a')")
    assert _imports(literal, modules, "pkg.b", False) == {"pkg.a"}
    prefixed = ast.parse("from importlib import import_module\nfor n in N:\n    import_module(f'pkg.views.{n}')")
    assert _imports(prefixed, modules, "pkg.b", False) == {"pkg.views.x", "pkg.views.y"}
    constant = ast.parse("_DEFAULT = 'pkg.other'\ndef f():\n    __import__(_DEFAULT)")
    assert _imports(constant, modules, "pkg.b", False) == {"pkg.other"}
    # A string that names a module in a module that never imports by name is no edge.
    assert _imports(ast.parse("NAME = 'pkg.a'"), modules, "pkg.b", False) == set()


def test_a_cycle_through_a_package_init_is_found() -> None:
    # pkg/__init__ imports pkg.a; pkg.a imports x; x imports pkg.b, which runs pkg/__init__ first.
    modules = {"pkg", "pkg.a", "pkg.b", "x"}
    direct = {"pkg": {"pkg.a"}, "pkg.a": {"x"}, "x": {"pkg.b"}, "pkg.b": set()}
    assert cycles(direct) == []  # the edges written in the source alone: no cycle
    graph = {name: targets | through_packages(name, targets, modules) for name, targets in direct.items()}
    assert graph["x"] == {"pkg.b", "pkg"}
    assert cycles(graph) == [["pkg", "pkg.a", "x"]]
    # A package's own modules do not run its __init__ again: pkg.a importing pkg.b adds no edge.
    assert through_packages("pkg.a", {"pkg.b"}, modules) == set()


def test_the_graph_counts_the_package_inits_imports_run() -> None:
    graph = import_graph()
    # cli/analyze.py imports traceinsight.api (no parent beyond the root) and
    # traceinsight.render.formats, which runs traceinsight/render/__init__ first.
    assert "traceinsight.render" in graph["traceinsight.cli.analyze"]
    assert "traceinsight" not in graph["traceinsight.cli.analyze"]  # the root ran before it


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the whole package was read
    assert cycles(graph) == []


def test_no_module_over_500_lines() -> None:
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_every_registered_module_loads_and_names_its_results() -> None:
    from traceinsight.analysis import registry
    from traceinsight.analysis.job.specs import JOB_SECTIONS
    from traceinsight.render import section_views as views

    assert [s.name for s in registry.ANALYSES] == [
        "overview", "breakdown", "gaps", "steps", "ops", "kernels", "memory", "bound", "compile", "serving",
        "window", "critical_path", "findings",
    ]
    # Every section, of a trace or of a job, is shown through the one view registry.
    assert set(views.registered()) == {s.name for s in registry.ANALYSES} | set(JOB_SECTIONS)


def test_a_registered_module_without_a_spec_fails_at_import() -> None:
    from traceinsight.analysis.core.registry import RegistryError, specs_of
    from traceinsight.analysis.lib import intervals

    with pytest.raises(RegistryError, match=r"lib\.intervals' exposes neither SPEC nor SPECS"):
        specs_of(intervals)


def test_a_result_named_unlike_its_spec_fails_the_run(sample_trace) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import dataclass
    from typing import ClassVar

    from traceinsight.analysis import runner
    from traceinsight.analysis.core import registry
    from traceinsight.analysis.core.base import AnalysisSpec, Result

    @dataclass(frozen=True)
    class Misnamed(Result):
        name: ClassVar[str] = "not_overview"

    spec = AnalysisSpec(name="overview", title="Overview", run=lambda trace, config, inputs: Misnamed())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "get", lambda name: spec)
        mp.setattr(runner, "closure", lambda names: ("overview",))
        with pytest.raises(registry.RegistryError, match="not_overview"):
            runner.run_closure(sample_trace("mm_sweep_64"), runner.AnalysisConfig(), ("overview",))


EXAMPLE_ANALYSIS = '''
"""Idle gaps longer than 1 ms."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.analysis.sections.gaps import GapsResult
from traceinsight.trace.model import Trace


@dataclass(frozen=True)
class LongGapsResult(Result):
    name: ClassVar[str] = "long_gaps"
    gaps: pl.DataFrame = field(default_factory=pl.DataFrame)


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> LongGapsResult:
    gaps = inputs.get("gaps", GapsResult)
    return LongGapsResult(gaps=gaps.gaps.filter(pl.col("dur_ns") > 1_000_000))


SPEC = AnalysisSpec(name="long_gaps", title="Long gaps", run=run, requires=("gaps",))
'''

EXAMPLE_VIEW = '''
"""Terminal view of the long gaps."""
from __future__ import annotations

from rich.text import Text

from traceinsight.analysis.sections.long_gaps import LongGapsResult
from traceinsight.render import views


def render_terminal(result: LongGapsResult) -> Text:
    return Text(f"LONG GAPS VIEW: {result.gaps.height} gaps over 1 ms")


views.register(LongGapsResult, terminal=render_terminal)
'''


def test_adding_an_analysis_with_a_terminal_view_touches_two_files_and_the_registry_line(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "traceinsight"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "analysis" / "sections" / "long_gaps.py").write_text(EXAMPLE_ANALYSIS, encoding="utf-8")
    (copy / "render" / "sections" / "long_gaps.py").write_text(EXAMPLE_VIEW, encoding="utf-8")
    registry = copy / "analysis" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    assert "    kernels,\n" in text and "        compile,\n" in text
    text = text.replace("    kernels,\n", "    kernels,\n    long_gaps,\n", 1).replace("        compile,\n", "        compile,\n        long_gaps,\n", 1)
    registry.write_text(text, encoding="utf-8")

    sample = PACKAGE.parent / "sample_traces" / "dataloader_w0.json.gz"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "100", "TRACEINSIGHT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "traceinsight", "analyze", str(sample), "--only", "long_gaps", "--no-cache"],
        env=env, capture_output=True, text=True, check=False, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Long gaps" in done.stdout
    assert "LONG GAPS VIEW:" in done.stdout  # its own terminal view, not the generic one
    gaps_over_1ms = int(done.stdout.split("LONG GAPS VIEW: ")[1].split()[0])
    assert gaps_over_1ms > 0  # data loading leaves gaps of tens of ms
    json_out = subprocess.run(
        [sys.executable, "-m", "traceinsight", "analyze", str(sample), "--only", "long_gaps", "-f", "json", "--no-cache"],
        env=env, capture_output=True, text=True, check=False, cwd=tmp_path,
    )
    assert json_out.returncode == 0, json_out.stderr
    assert '"long_gaps"' in json_out.stdout
