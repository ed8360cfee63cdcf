"""A light progress hook for the slow part of loading a big trace.

The reader calls :func:`report` as it goes (bytes of the file read, bytes of JSON decoded,
events decoded); whoever wants to show it installs a callback with :func:`reporting`. Without
one, a report costs a context-variable lookup per chunk of several MB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# (phase, bytes done, bytes in all, events decoded so far)
ProgressCallback = Callable[[str, int, int, int], None]

_callback: ContextVar[ProgressCallback | None] = ContextVar("traceinsight_load_progress", default=None)


def report(phase: str, done_bytes: int, total_bytes: int, events: int = 0) -> None:
    callback = _callback.get()
    if callback is not None:
        callback(phase, done_bytes, total_bytes, events)


@contextmanager
def reporting(callback: ProgressCallback) -> Iterator[None]:
    token = _callback.set(callback)
    try:
        yield
    finally:
        _callback.reset(token)
