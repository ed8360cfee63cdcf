"""Run one function per rank file where the work is cheapest: in this process, in a local
process pool, or as Ray tasks; only the function's (small) return value comes back.

Faults stay with their rank: a function that raises gives that rank an error line; a worker
that dies takes down only the tasks it ran (the others are run again in a fresh pool); a
task that makes no progress within ``timeout_s`` is reported as timed out, not waited on.

Workers never run the user's ``__main__``: spawn and forkserver children normally re-run the
parent's main script (or module) before they unpickle their task, so a script that calls
``load_job`` without an ``if __name__ == "__main__":`` guard would run again in every worker,
and ``python3 - <<EOF`` or ``python -c`` would have no script to run. Our tasks are functions
of importable modules, so the workers start from a blank ``__main__`` instead.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import multiprocessing
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

from traceinsight.engine.tasks import EngineError, TaskOutcome, error_line, guarded

T = TypeVar("T")
X = TypeVar("X")
Engine = Literal["serial", "local", "ray"]
ENGINES: tuple[str, ...] = ("serial", "local", "ray")


def default_jobs() -> int:
    return max(1, os.cpu_count() or 1)


def run_per_rank(
    items: Sequence[X],
    fn: Callable[[X], T],
    *,
    engine: Engine | str = "local",
    jobs: int | None = None,
    address: str | None = None,
    timeout_s: float | None = None,
) -> list[TaskOutcome[T]]:
    """``fn(item)`` for every item, in input order; ``fn`` and the items must pickle (a
    module-level function, or a ``functools.partial`` of one)."""
    if engine not in ENGINES:
        raise EngineError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if jobs is not None and jobs < 1:
        raise EngineError(f"jobs must be at least 1, not {jobs}")
    if not items:
        return []
    if engine == "serial" or (engine == "local" and multiprocessing.current_process().daemon):
        # A daemonic worker (ours, or the user's own pool) may not start processes of its own.
        return run_serial(items, fn)
    if engine == "ray":
        from traceinsight.engine.ray_engine import run_ray

        return run_ray(items, fn, address=address, jobs=jobs, timeout_s=timeout_s)
    return run_local(items, fn, jobs=jobs, timeout_s=timeout_s)


def run_serial(items: Sequence[X], fn: Callable[[X], T]) -> list[TaskOutcome[T]]:
    outcomes: list[TaskOutcome[T]] = []
    for i, item in enumerate(items):
        try:
            outcomes.append(TaskOutcome(i, value=fn(item)))
        except Exception as exc:  # each rank's failure is its own; the others go on
            outcomes.append(TaskOutcome(i, error=error_line(exc)))
    return outcomes


def _context() -> Any:
    # fork would copy the parent's threads (polars' pool) into the children; forkserver where
    # there is one, spawn elsewhere.
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    return multiprocessing.get_context(method)


def _from_main(fn: Callable[..., Any], item: object) -> bool:
    """Whether the task needs the user's ``__main__`` in the worker (a function or an item type
    defined there pickles by reference to it)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__module__", None) == "__main__" or type(item).__module__ == "__main__"


@contextlib.contextmanager
def clean_main(keep: bool = False) -> Iterator[None]:
    """While worker processes are started, a blank ``__main__`` in ``sys.modules``: what a
    spawn or forkserver child is told to re-run is read from it, and a blank one has nothing
    to re-run. ``keep``: leave the real one (the task lives in it)."""
    real = sys.modules.get("__main__")
    if keep or real is None:
        yield
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def _kill(executor: cf.ProcessPoolExecutor) -> None:
    processes = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        if process.is_alive():
            process.terminate()
    executor.shutdown(wait=False, cancel_futures=True)


def _round(
    items: Sequence[X],
    indices: list[int],
    fn: Callable[[X], T],
    workers: int,
    timeout_s: float | None,
    done: dict[int, TaskOutcome[T]],
) -> list[int]:
    """One pool over ``indices``; fills ``done`` and returns the indices to run again (those
    lost to a dead worker)."""
    executor = cf.ProcessPoolExecutor(max_workers=min(workers, len(indices)), mp_context=_context())
    # The pool starts its processes inside submit(), in this thread.
    with clean_main(keep=_from_main(fn, items[indices[0]])):
        futures = {executor.submit(guarded, fn, items[i]): i for i in indices}
    pending = set(futures)
    broken: list[int] = []
    try:
        while pending:
            finished, pending = cf.wait(pending, timeout=timeout_s, return_when=cf.FIRST_COMPLETED)
            if not finished:
                # Nothing finished in timeout_s: the running tasks are hung; the queued ones
                # never started and go to the next round.
                for future in pending:
                    i = futures[future]
                    if future.running():
                        done[i] = TaskOutcome(i, error=f"timed out after {timeout_s:g} s")
                    else:
                        broken.append(i)
                _kill(executor)
                return broken
            for future in finished:
                i = futures[future]
                try:
                    done[i] = TaskOutcome(i, value=future.result())
                except BrokenProcessPool:
                    broken.append(i)
                except Exception as exc:
                    done[i] = TaskOutcome(i, error=error_line(exc))
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return broken


def run_local(
    items: Sequence[X],
    fn: Callable[[X], T],
    *,
    jobs: int | None = None,
    timeout_s: float | None = None,
) -> list[TaskOutcome[T]]:
    """A process pool of ``jobs`` workers (default: one per core)."""
    workers = jobs or default_jobs()
    done: dict[int, TaskOutcome[T]] = {}
    todo = list(range(len(items)))
    # A dead worker breaks the whole pool: run what it took down again in a fresh pool while
    # that makes progress; then run each remaining task alone, so the one that kills its
    # worker is found and the others still finish.
    while todo:
        before = len(done)
        todo = _round(items, todo, fn, workers, timeout_s, done)
        if todo and len(done) == before:
            break
    for i in todo:
        again = _round(items, [i], fn, 1, timeout_s, done)
        for j in again:
            done[j] = TaskOutcome(j, error="the worker process died while analysing this rank")
    return [done[i] for i in range(len(items))]
