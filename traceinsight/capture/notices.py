"""Warnings that capture gives once per process: which counters are missing, and why."""

from __future__ import annotations

import threading
import warnings

# Reasons already reported; "says so once" is per process and per reason.
_reported: set[str] = set()
_reported_lock = threading.Lock()


def report_unavailable(what: str, reason: str) -> None:
    """Warn once per process that counters are missing and why."""
    key = f"{what}: {reason}"
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    warnings.warn(
        f"traceinsight: {what} unavailable ({reason}); capturing without them",
        RuntimeWarning,
        stacklevel=3,
    )


def forget_reported() -> None:
    """Let every reason be reported again (a new capture session, or a test)."""
    with _reported_lock:
        _reported.clear()
