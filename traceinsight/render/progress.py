"""An indeterminate progress display on stderr for the slow phases of big traces.

The loader reports no progress, so this shows which phase is running (reading, analysing a
section, rendering) with a spinner and elapsed time, and nothing at all unless stderr is a
terminal and the trace is large enough for the wait to be noticeable.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

# Below this, loading takes about a second: a spinner would only flicker.
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


@contextmanager
def phases(enabled: bool) -> Iterator[Phase]:
    """Yields ``phase(description)``; a no-op when disabled."""
    if not enabled:
        yield lambda description: None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from traceinsight.render.terminal import make_console

    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=None),
        TimeElapsedColumn(),
        console=make_console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task("starting", total=None)
        yield lambda description: progress.update(task, description=description)
