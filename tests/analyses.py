"""Full analyses of recorded traces, shared by the test files of one run.

Many test files check a different view of the same analysis of every sample trace (the formats,
the verdict, the widths, the agreement of views). Each (trace, options) pair is analysed once per
run: the first test that needs it runs :func:`traceinsight.analysis.report.analyze` and stores
the pickled report in a directory that every worker of the run shares (``conftest`` makes it
at the start of the run and removes it at the end); the others unpickle it, each getting its own
copy. Files that read the same samples in the same order often run side by side on two
workers: a worker that finds another analysing the trace waits for its report (a lock file per
key) rather than analysing it a second time. The key is the file's identity (resolved path, size, modification time) and a
fingerprint of the package's source, so a report is never reused across code versions.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not on Windows: there, two workers may analyse a trace twice
    fcntl = None  # type: ignore[assignment]

ENV_DIR = "TRACEINSIGHT_TEST_ANALYSES"
PACKAGE = Path(__file__).resolve().parent.parent / "traceinsight"


@functools.cache
def code_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _key(path: Path, only: tuple[str, ...] | None) -> str:
    stat = path.stat()
    ident = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{only}|{code_fingerprint()}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


_memory: dict[str, bytes] = {}


@contextlib.contextmanager
def _claimed(entry: Path) -> Iterator[None]:
    """Held while this worker reads or makes ``entry``: another worker asking for the same key
    meanwhile waits, then reads what this one wrote."""
    if fcntl is None:
        yield
        return
    with open(entry.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def analysed(path: str | os.PathLike[str], *, only: tuple[str, ...] | None = None) -> Any:
    """The :class:`Report` of the trace at ``path`` (loaded through the run's trace cache),
    analysed once per run; every call returns a fresh copy."""
    file = Path(path)
    key = _key(file, only)
    data = _memory.get(key)
    shared = os.environ.get(ENV_DIR)
    entry = Path(shared) / f"{key}.pickle" if shared else None
    if data is None and entry is not None:
        with _claimed(entry):
            if entry.is_file():
                data = entry.read_bytes()
            else:
                data = _analyse(file, only)
                # Written whole, then renamed: a reader without the lock never sees half a report.
                fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, entry)
    if data is None:
        data = _analyse(file, only)
    _memory[key] = data
    return pickle.loads(data)


def _analyse(file: Path, only: tuple[str, ...] | None) -> bytes:
    from traceinsight.analysis.report import analyze
    from traceinsight.trace.loader import load

    report = analyze(load(file), only=list(only) if only is not None else None)
    return pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
