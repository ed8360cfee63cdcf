"""The package's structure: no import cycles, no module over 500 lines, every registered
analysis and view module loads, and a misspelled registry line fails loudly.

The import graph is read from the source (every ``import`` a module can execute, at module
level or inside functions; imports under ``if TYPE_CHECKING:`` never run and are left out).
Importing ``a.b.c`` is an edge to ``a.b.c`` only, not to its parent packages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "traceinsight"
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
    found.discard(here)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {
        name: _imports(ast.parse(path.read_text(encoding="utf-8")), modules, name, path.name == "__init__.py")
        for name, path in paths.items()
    }


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
    from traceinsight.analysis.core import registry
    from traceinsight.render import views

    assert [s.name for s in registry.ANALYSES] == [
        "overview", "breakdown", "gaps", "steps", "ops", "kernels", "memory", "bound", "compile", "serving",
        "window", "critical_path", "findings",
    ]
    assert set(views.registered()) == {s.name for s in registry.ANALYSES}


def test_a_misspelled_registry_line_fails_at_import() -> None:
    from traceinsight.analysis.core.registry import RegistryError, load_specs

    with pytest.raises(RegistryError, match=r"sections\.gapz"):
        load_specs(("sections.gapz",))
    with pytest.raises(RegistryError, match="exposes neither SPEC nor SPECS"):
        load_specs(("lib.intervals",))


def test_a_result_named_unlike_its_spec_fails_the_run(sample_trace) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import dataclass
    from typing import ClassVar

    from traceinsight.analysis.core import registry, runner
    from traceinsight.analysis.core.base import AnalysisSpec, Result

    @dataclass(frozen=True)
    class Misnamed(Result):
        name: ClassVar[str] = "not_overview"

    spec = AnalysisSpec(name="overview", title="Overview", run=lambda trace, config, inputs: Misnamed())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(registry, "get", lambda name: spec)
        mp.setattr(registry, "closure", lambda names: ("overview",))
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
    registry = copy / "analysis" / "core" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    assert '    "sections.compile",\n' in text
    registry.write_text(text.replace('    "sections.compile",\n', '    "sections.compile",\n    "sections.long_gaps",\n'), encoding="utf-8")

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
