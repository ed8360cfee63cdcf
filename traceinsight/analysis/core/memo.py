"""Results computed once per loaded trace and shared while it lives.

Several analyses (and the findings' detectors) ask the same question of one trace: the model
of its device, the cost of every kernel, the host calls that wait for the device. On a trace of
a million events each answer costs a pass over the frames; here it is kept beside the trace,
keyed by what it depends on, and dropped with the trace (never handed to another trace that
gets the same ``id``). A trace is frozen, so an answer cannot go stale.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_MEMO: dict[int, dict[Hashable, Any]] = {}


def per_trace(trace: object, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()`` the first time ``key`` is asked of ``trace``; the kept answer after."""
    tid = id(trace)
    kept = _MEMO.get(tid)
    if kept is None:
        kept = _MEMO[tid] = {}
        weakref.finalize(trace, _MEMO.pop, tid, None)
    if key not in kept:
        kept[key] = compute()
    result: T = kept[key]
    return result
