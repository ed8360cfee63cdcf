"""A progress display on stderr for the slow phases of big traces.

While the file is read and decoded it shows bytes done of the total with a rate and the time
left, and the events decoded so far; afterwards, which phase is running (analysing a section,
rendering) with a spinner and the elapsed time. Nothing at all unless stderr is a terminal and
the trace is large enough for the wait to be noticeable. Asked for on a stream that is not a
terminal, it writes one plain line per phase instead (no spinner, no clock), which keeps the
order of the phases checkable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

# Below this, loading takes about a second: a progress bar would only flicker.
PROGRESS_MIN_BYTES = 50 * 1024 * 1024


class Phase(Protocol):
    def __call__(self, description: str) -> None: ...


def wants_progress(path: Path, stream: IO[str] | None = None, *, min_bytes: int = PROGRESS_MIN_BYTES) -> bool:
    stream = stream or sys.stderr
    try:
        big = path.stat().st_size > min_bytes
    except OSError:
        return False
    return big and stream.isatty()


def events_text(events: int, elapsed_s: float) -> str:
    """``1,234,567 events (410,000/s)``; empty before the first event."""
    if events <= 0:
        return ""
    rate = f" ({events / elapsed_s:,.0f}/s)" if elapsed_s > 0 else ""
    return f"{events:,} events{rate}"


@contextmanager
def loading(phase: Phase) -> Iterator[None]:
    """While loading: the reader's progress (bytes read, then decoded, and events) shown by
    ``phase`` when it is a live display (the disabled one shows nothing)."""
    callback = getattr(phase, "load_progress", None)
    if callback is None:
        yield
        return
    from traceinsight.trace.progress import reporting

    with reporting(callback):
        yield


class PhaseLines:
    """One line per phase on ``stream``: the display for a stream that is not a terminal.
    A loading phase is written once, when it starts, without its byte counts."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.current = ""

    def __call__(self, description: str) -> None:
        self.current = description
        self.stream.write(description + "\n")
        self.stream.flush()

    def load_progress(self, phase: str, done_bytes: int, total_bytes: int, events: int) -> None:
        if phase != self.current:
            self(phase)


@contextmanager
def phases(enabled: bool, *, stream: IO[str] | None = None) -> Iterator[Phase]:
    """Yields ``phase(description)``; a no-op when disabled. On ``stream`` (default stderr):
    a live display when it is a terminal, else :class:`PhaseLines`."""
    if not enabled:
        yield lambda description: None
        return
    stream = stream or sys.stderr
    if not stream.isatty():
        yield PhaseLines(stream)
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from traceinsight.render.terminal import make_console

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=None),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[events]}"),
        TimeElapsedColumn(),
        console=make_console(stream),
        transient=True,
    )

    class _Phase:
        def __init__(self) -> None:
            self.task = progress.add_task("starting", total=None, events="")
            self.started = time.monotonic()
            self.current = ""

        def __call__(self, description: str) -> None:
            # A phase without byte counts: the bar spins and the byte columns go blank.
            progress.reset(self.task, total=None, description=description, events="")

        def load_progress(self, phase: str, done_bytes: int, total_bytes: int, events: int) -> None:
            if phase != self.current:
                self.current = phase
                self.started = time.monotonic()
                progress.reset(self.task, total=total_bytes, description=phase, events="")
            progress.update(
                self.task,
                completed=done_bytes,
                events=events_text(events, time.monotonic() - self.started),
            )

    with progress:
        yield _Phase()
