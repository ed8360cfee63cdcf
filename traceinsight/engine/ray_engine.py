"""Ray tasks, one per rank file, on an existing cluster (``address`` or ``RAY_ADDRESS``) or a
local Ray started for the run. Only Ray's task API is used: scheduling is Ray's.

On a cluster, the workers need traceinsight installed (or a ``runtime_env``) and the trace
files reachable at the same paths or URLs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from traceinsight.engine.tasks import EngineError, TaskOutcome, error_line, guarded

T = TypeVar("T")
X = TypeVar("X")

RAY_EXTRA = "traceinsight[ray]"


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise EngineError(f"the ray engine needs Ray: pip install '{RAY_EXTRA}'") from exc
    return ray


def connect(address: str | None = None, jobs: int | None = None) -> Any:
    """The ray module, connected: to ``address`` / ``RAY_ADDRESS`` when given, else a local
    Ray with ``jobs`` CPUs (reused when this process already started one)."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    target = address or os.environ.get("RAY_ADDRESS")
    try:
        if target:
            ray.init(address=target, log_to_driver=False)
        else:
            # Workers must import traceinsight the way this process does.
            env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in _python_path() if p)}}
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False, runtime_env=env)
    except Exception as exc:
        where = f"at {target}" if target else "locally"
        raise EngineError(f"cannot start or reach Ray {where}: {error_line(exc)}") from exc
    return ray


def _python_path() -> list[str]:
    # The directory holding the traceinsight package: this file is traceinsight/engine/ray_engine.py.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    existing = os.environ.get("PYTHONPATH", "")
    return [root, *existing.split(os.pathsep)]


def run_ray(
    items: Sequence[X],
    fn: Callable[[X], T],
    *,
    address: str | None = None,
    jobs: int | None = None,
    timeout_s: float | None = None,
) -> list[TaskOutcome[T]]:
    ray = connect(address, jobs)
    # One retry for a worker that died (not for an exception the function raised).
    remote = ray.remote(max_retries=1, retry_exceptions=False)(guarded)
    refs = [remote.remote(fn, item) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    done: dict[int, TaskOutcome[T]] = {}
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=timeout_s)
        if not ready:
            for ref in pending:
                ray.cancel(ref, force=True)
                done[index[ref]] = TaskOutcome(index[ref], error=f"timed out after {timeout_s:g} s")
            break
        for ref in ready:
            i = index[ref]
            try:
                done[i] = TaskOutcome(i, value=ray.get(ref))
            except Exception as exc:  # a task error or a lost worker: that rank only
                done[i] = TaskOutcome(i, error=error_line(exc))
    return [done[i] for i in range(len(items))]
