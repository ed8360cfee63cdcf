"""Mutation testing of the modules that turn a trace into what users read (``nox -s mutation``).

Each module is mutated by cosmic-ray in its own copy of the source tree under
``build/mutation/<name>/`` (the working tree is never edited), against the fast tests that
cover it: hand-made traces, no samples where avoidable. Modules run in parallel, one per
core. The score per module is printed as a table and written to ``build/mutation/scores.md``;
the surviving mutants, as diffs, to ``build/mutation/<name>/survivors.txt``.

    python tests/mutation.py                 # every module below
    python tests/mutation.py idle stats      # modules whose path contains "idle" or "stats"
    python tests/mutation.py --list          # the modules and their tests
    python tests/mutation.py --report        # the scores of the runs so far, running nothing
    python tests/mutation.py --max-minutes 20 --resume idle   # time-box; go on where it stopped
    python tests/mutation.py --recheck idle   # the survivors again, against the current tests
    python tests/mutation.py --sample 60 link # 60 of link.py's mutants, drawn at random
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "mutation"

_NUMBERS = "tests/unit/test_reported_numbers.py"
_FINDINGS = (
    "tests/unit/test_findings_edges.py",
    "tests/unit/test_findings_evidence.py",
    _NUMBERS,
    "tests/unit/test_findings_handmade.py",
)
# Module → the tests run against each of its mutants (fast ones; they stop at the first failure).
TARGETS: dict[str, tuple[str, ...]] = {
    "traceinsight/analysis/findings/detect/idle.py": _FINDINGS,
    "traceinsight/analysis/findings/price/savings.py": _FINDINGS,
    "traceinsight/analysis/findings/detect/transfers.py": _FINDINGS,
    "traceinsight/analysis/findings/detect/training.py": _FINDINGS,
    "traceinsight/analysis/findings/read/syncs.py": _FINDINGS,
    "traceinsight/analysis/findings/detect/precision.py": _FINDINGS,
    "traceinsight/analysis/findings/catalogue.py": _FINDINGS,
    "traceinsight/analysis/lib/stats.py": (
        "tests/unit/test_stats_edges.py",
        "tests/unit/test_stats.py",
        _NUMBERS,
    ),
    "traceinsight/analysis/sections/gaps.py": (
        _NUMBERS,
        "tests/unit/test_findings_edges.py",
        "tests/integration/test_gaps.py",
    ),
    "traceinsight/trace/link.py": (
        "tests/unit/test_nesting.py",
        _NUMBERS,
        "tests/integration/test_steps.py",
        "tests/integration/test_loader.py",
    ),
    "traceinsight/trace/nesting.py": (
        "tests/unit/test_nesting.py",
        _NUMBERS,
        "tests/integration/test_steps.py",
        "tests/integration/test_loader.py",
    ),
    "traceinsight/analysis/cost/args.py": (
        "tests/unit/test_cost_args.py",
        "tests/unit/test_costmodel.py",
        _NUMBERS,
    ),
    "traceinsight/analysis/cost/formulas.py": ("tests/unit/test_costmodel.py",),
    "traceinsight/analysis/sections/steps.py": ("tests/integration/test_steps.py",),
}
# Operators left out: replacements that only produce code which crashes at once (an arithmetic
# operator swapped for a shift or xor, ``<`` for ``is``) or that needs no test to tell apart
# (a decorator removed, a variable renamed to another), so that the run spends its time on
# mutants a test could miss. ``&``/``|`` swaps and ``~`` removal are kept: they are the polars
# filters.
EXCLUDE_OPERATORS = [
    r"core/ReplaceBinaryOperator_(Add|Sub|Mul|Div|FloorDiv|Mod|Pow)_(Pow|RShift|LShift|BitOr|BitAnd|BitXor|Mod)$",
    r"core/ReplaceBinaryOperator_(RShift|LShift|BitXor|Pow|Mod)_.*",
    r"core/ReplaceBinaryOperator_(BitOr|BitAnd)_(Add|Sub|Mul|Div|FloorDiv|Mod|Pow|RShift|LShift|BitXor)$",
    r"core/ReplaceComparisonOperator_.*_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Lt|LtE|Gt|GtE)$",
    r"core/RemoveDecorator",
    r"core/VariableReplacer",
    r"core/VariableInserter",
    r"core/ExceptionReplacer",
]
UNSAMPLED = "not in the sample"
COPIED = ("traceinsight", "tests", "docs", "sample_traces", "pyproject.toml")


@dataclass
class Score:
    module: str
    mutants: int = 0
    killed: int = 0
    timeout: int = 0
    survived: int = 0
    incompetent: int = 0
    pending: int = 0
    unsampled: int = 0
    minutes: float = 0.0

    @property
    def score(self) -> float:
        done = self.killed + self.timeout + self.survived
        return 100.0 * (self.killed + self.timeout) / done if done else 0.0

    def row(self) -> str:
        return (
            f"| `{self.module}` | {self.mutants} | {self.unsampled} | {self.killed + self.timeout} | {self.survived} | "
            f"{self.incompetent} | {self.pending} | {self.score:.1f} % | {self.minutes:.1f} |"
        )


def _name(module: str) -> str:
    return module.removeprefix("traceinsight/").removesuffix(".py").replace("/", ".")


def _pytest(tests: tuple[str, ...]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        *tests,
    ]


def _copy_tree(dest: Path, keep: tuple[str, ...] = ()) -> None:
    """The files the tests need, copied afresh into ``dest``; of what was there, only the
    entries named in ``keep`` stay."""
    if dest.exists():
        for entry in dest.iterdir():
            if entry.name in keep:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for item in COPIED:
        src = ROOT / item
        if src.is_dir():
            shutil.copytree(src, dest / item, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / item)


def _config(module: str, tests: tuple[str, ...], timeout: float) -> str:
    # ``pythonpath = ["."]`` in pyproject.toml puts the copy first on sys.path: the tests
    # import the mutated copy, not the installed package.
    command = _pytest(tests)
    excluded = ", ".join(json.dumps(e) for e in EXCLUDE_OPERATORS)
    return (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(' '.join(command))}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n\n'
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n"
    )


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _score(module: str, work: Path) -> Score:
    dump = subprocess.run(
        [_tool("cosmic-ray"), "dump", "session.sqlite"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    s = Score(module)
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            s.pending += 1
            s.mutants += 1
            continue
        if result["worker_outcome"] == "skipped":
            s.unsampled += result.get("output") == UNSAMPLED
            continue
        s.mutants += 1
        if result["worker_outcome"] == "timeout":
            s.timeout += 1
        elif result["test_outcome"] == "killed":
            s.killed += 1
        elif result["test_outcome"] == "incompetent":
            s.incompetent += 1
        else:
            s.survived += 1
            m = item["mutations"][0]
            survivors.append(
                f"# {m['operator_name']} line {m['start_pos'][0]}\n{result.get('diff') or ''}"
            )
    (work / "survivors.txt").write_text("\n".join(survivors))
    return s


def run_module(
    module: str,
    tests: tuple[str, ...],
    max_minutes: float | None,
    resume: bool,
    recheck: bool = False,
    sample: int | None = None,
) -> Score:
    work = OUT / _name(module)
    started = time.monotonic()
    if recheck and (work / "session.sqlite").exists():
        # New tests since the run: put the survivors back in the queue, against today's tests
        # and today's package (tests written since may read code changed since: against the
        # old copy they would fail whatever the mutant, and "kill" every survivor).
        _copy_tree(
            work, keep=("session.sqlite", "cosmic-ray.toml", "timeout", "exec.log", "survivors.txt")
        )
        if subprocess.run(_pytest(tests), cwd=work, capture_output=True).returncode != 0:
            raise SystemExit(
                f"{module}: the tests fail without mutations: {' '.join(_pytest(tests))}"
            )
        (work / "cosmic-ray.toml").write_text(_config(module, tests, _timeout(work)))
        with sqlite3.connect(work / "session.sqlite") as db:
            db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")
    elif not (resume and (work / "session.sqlite").exists()):
        _copy_tree(work)
        t0 = time.monotonic()
        # The unmutated tests must pass, and they set the per-mutant time limit.
        cmd = _pytest(tests)
        if subprocess.run(cmd, cwd=work, capture_output=True).returncode != 0:
            raise SystemExit(f"{module}: the tests fail without mutations: {' '.join(cmd)}")
        timeout = 3 * (time.monotonic() - t0) + 10
        (work / "timeout").write_text(f"{timeout:.0f}")
        (work / "cosmic-ray.toml").write_text(_config(module, tests, timeout))
        subprocess.run(
            [_tool("cosmic-ray"), "init", "cosmic-ray.toml", "session.sqlite", "--force"],
            cwd=work,
            check=True,
        )
        subprocess.run(
            [_tool("cr-filter-operators"), "session.sqlite", "cosmic-ray.toml"],
            cwd=work,
            check=True,
            capture_output=True,
        )
        if sample:
            _keep_sample(work / "session.sqlite", sample)
    proc = subprocess.Popen(
        [_tool("cosmic-ray"), "exec", "cosmic-ray.toml", "session.sqlite"],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=(work / "exec.log").open("w"),
        start_new_session=True,
    )
    try:
        proc.wait(timeout=None if max_minutes is None else max_minutes * 60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 15)
        proc.wait()
        # The interrupted mutant may be left applied in the copy: start from the source again.
        _restore(module, work)
    s = _score(module, work)
    s.minutes = (time.monotonic() - started) / 60
    return s


def _keep_sample(db_path: Path, n: int) -> None:
    """Keep ``n`` of the pending mutants, drawn at random (seeded: the same draw each time);
    mark the others skipped, so that a module too big for the time at hand gets an estimate."""
    with sqlite3.connect(db_path) as db:
        pending = [
            row[0]
            for row in db.execute(
                "SELECT job_id FROM work_items WHERE job_id NOT IN (SELECT job_id FROM work_results) ORDER BY job_id"
            )
        ]
        rng = random.Random(0)
        left_out = sorted(set(pending) - set(rng.sample(pending, min(n, len(pending)))))
        db.executemany(
            "INSERT INTO work_results (worker_outcome, output, job_id) VALUES ('SKIPPED', ?, ?)",
            [(UNSAMPLED, job) for job in left_out],
        )


def _timeout(work: Path) -> float:
    path = work / "timeout"
    return float(path.read_text()) if path.exists() else 60.0


def _restore(module: str, work: Path) -> None:
    shutil.copy2(ROOT / module, work / module)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("modules", nargs="*", help="parts of module paths (default: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="modules mutated at once")
    p.add_argument(
        "--max-minutes", type=float, default=None, help="stop each module after this long"
    )
    p.add_argument("--resume", action="store_true", help="go on with the mutants left pending")
    p.add_argument(
        "--recheck",
        action="store_true",
        help="run the surviving mutants again against the current tests",
    )
    p.add_argument(
        "--sample", type=int, default=None, help="mutate only N mutants per module, drawn at random"
    )
    p.add_argument("--report", action="store_true", help="only the scores of the runs so far")
    p.add_argument("--list", action="store_true", help="list the modules and their tests")
    args = p.parse_args(argv)
    chosen = {
        m: tuple(t for t in tests if (ROOT / t).exists())
        for m, tests in TARGETS.items()
        if not args.modules or any(a in m for a in args.modules)
    }
    if args.list or not chosen:
        for m, t in TARGETS.items():
            print(f"{m}: {' '.join(t)}")
        return 0 if chosen else 2
    OUT.mkdir(parents=True, exist_ok=True)
    if args.report:
        scores = [
            _score(m, OUT / _name(m))
            for m in chosen
            if (OUT / _name(m) / "session.sqlite").exists()
        ]
    else:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {
                pool.submit(
                    run_module, m, t, args.max_minutes, args.resume, args.recheck, args.sample
                ): m
                for m, t in chosen.items()
            }
            scores = [f.result() for f in concurrent.futures.as_completed(futures)]
    scores.sort(key=lambda s: s.module)
    table = [
        "| module | mutants | not sampled | killed | survived | incompetent | not run | score | minutes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(s.row() for s in scores),
    ]
    text = "\n".join(table)
    print(text)
    if args.report:
        return 0
    with (OUT / "scores.md").open("a") as fh:
        fh.write(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n{text}\n")
    print(f"survivors: {OUT}/<module>/survivors.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
