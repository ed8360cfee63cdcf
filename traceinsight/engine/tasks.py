"""What every engine shares: a task's outcome, its one-line error, and the engine's own error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from traceinsight.errors import TraceInsightError

T = TypeVar("T")
X = TypeVar("X")


class EngineError(TraceInsightError):
    """The chosen engine cannot run (not installed, no cluster, bad settings)."""


@dataclass(frozen=True)
class TaskOutcome(Generic[T]):
    """What one task gave back: its value, or a one-line error."""

    index: int
    value: T | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def error_line(exc: BaseException) -> str:
    """One line for an exception: a TraceInsightError says itself; others get their type."""
    cause = getattr(exc, "cause", None)  # Ray wraps the task's exception
    if isinstance(cause, BaseException) and cause is not exc:
        exc = cause
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, (TraceInsightError, TaskFailed)):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class TaskFailed(Exception):
    """A task's error, carried as one line (the original may not pickle back)."""


def guarded(fn: Callable[[X], T], item: X) -> T:
    """Run ``fn(item)`` in a worker, turning any error into a :class:`TaskFailed` line."""
    try:
        return fn(item)
    except Exception as exc:
        raise TaskFailed(error_line(exc)) from None
