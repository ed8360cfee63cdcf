"""What the server has loaded: traces, jobs and allocator snapshots with their reports, each
under a short handle, found again by path and modification time, within a memory cap.

A second question about an opened trace reads what is loaded; a file changed on disk is read
again (a new handle). Past the cap the least recently used entries are released, never the one
just opened; a released handle is opened again, from its path, when it is next used.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from traceinsight.errors import UsageError
from traceinsight.mcp.roots import Roots

if TYPE_CHECKING:
    from traceinsight.analysis.job.report import JobReport
    from traceinsight.analysis.report import Report
    from traceinsight.analysis.snapshot.report import SnapshotReport
    from traceinsight.engine.job import Job
    from traceinsight.trace.model import Trace
    from traceinsight.trace.snapshot.model import MemorySnapshot

Kind = Literal["trace", "job", "snapshot"]
Progress = Callable[[str], None]
KINDS: tuple[str, ...] = ("auto", "trace", "job", "snapshot")
SNAPSHOT_SUFFIXES = (".pickle", ".pkl")
# A job keeps one small summary per rank in memory (its frames stay in the Parquet cache).
JOB_RANK_BYTES = 1 << 20


@dataclass
class Entry:
    handle: str
    kind: Kind
    source: str  # the path (or glob) as the client gave it
    key: tuple[Any, ...]
    data: Trace | Job | MemorySnapshot
    bytes: int
    load_s: float
    cycle: str = "latest"
    notes: tuple[str, ...] = ()  # what loading warned about (the cycle chosen, missing ranks)
    analyze_s: float = 0.0
    # Analysed on first use (a diff or SQL needs only the frames), once.
    _report: Report | JobReport | SnapshotReport | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def report(self) -> Report | JobReport | SnapshotReport:
        return self.analyse()

    def analyse(self, progress: Progress | None = None) -> Report | JobReport | SnapshotReport:
        """The report, computed on the first call (``progress`` hears of each section)."""
        with self._lock:
            if self._report is None:
                import traceinsight as ti

                started = time.perf_counter()
                if self.kind == "snapshot":
                    self._report = ti.analyze_memory_snapshot(self.data)  # type: ignore[arg-type]
                elif self.kind == "job":
                    self._report = ti.analyze(self.data)  # type: ignore[arg-type]
                else:
                    hear = (lambda name: progress(f"analysing: {name}")) if progress else None
                    self._report = ti.analyze(self.data, on_section=hear)  # type: ignore[arg-type]
                self.analyze_s = time.perf_counter() - started
            return self._report

    @property
    def trace(self) -> Trace:
        from traceinsight.trace.model import Trace

        if not isinstance(self.data, Trace):
            raise UsageError(f"{self.handle} is a {self.kind}, not a trace")
        return self.data


def _mtimes(paths: list[Path]) -> tuple[int, ...]:
    """Modification times of the files (a folder: of its files, one level down)."""
    stamps: list[int] = []
    for path in paths:
        if path.is_dir():
            stamps.append(max((p.stat().st_mtime_ns for p in path.iterdir() if p.is_file()), default=0))
        stamps.append(path.stat().st_mtime_ns)
    return tuple(stamps)


def _frames_bytes(frames: list[Any]) -> int:
    return int(sum(f.estimated_size() for f in frames))


class Store:
    """Loaded entries by handle; loads are serialised so a file is never parsed twice at once."""

    def __init__(self, roots: Roots, *, max_bytes: int, cache: bool, jobs: int | None = None) -> None:
        self.roots = roots
        self.max_bytes = max_bytes
        self.cache = cache
        self.jobs = jobs
        self._entries: OrderedDict[str, Entry] = OrderedDict()  # least recently used first
        self._by_key: dict[tuple[Any, ...], str] = {}
        self._released: dict[str, tuple[str, Kind, str]] = {}
        self._counter = 0
        self._lock = threading.Lock()  # the tables below; never held while loading
        self._loading = threading.Lock()

    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries.values())

    def used_bytes(self) -> int:
        with self._lock:
            return sum(e.bytes for e in self._entries.values())

    def get(self, handle_or_path: str, *, kind: str = "auto") -> Entry:
        """The entry a handle names, or the path opened (a released handle is opened again)."""
        with self._lock:
            entry = self._entries.get(handle_or_path)
            if entry is not None:
                self._entries.move_to_end(handle_or_path)
                return entry
            released = self._released.get(handle_or_path)
        # Opened outside the table lock, which a load in progress needs to finish.
        if released is not None:
            source, was, cycle = released
            return self.open(source, kind=was, cycle=cycle, handle=handle_or_path)
        if _looks_like_handle(handle_or_path):
            raise UsageError(f"unknown handle {handle_or_path!r}: open a path first (handles: {', '.join(self._entries) or 'none'})")
        return self.open(handle_or_path, kind=kind)

    def open(
        self, source: str, *, kind: str = "auto", cycle: str = "latest", handle: str | None = None,
        progress: Progress | None = None,
    ) -> Entry:  # fmt: skip
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        paths = self.roots.expand(source)
        chosen = self._kind(source, paths, kind)
        key = (chosen, tuple(str(p) for p in paths), _mtimes(paths), cycle)
        # One load at a time (two calls for one new file parse it once); questions about
        # what is loaded go on meanwhile, as they take only the table lock.
        with self._loading:
            known = self._known(key)
            if known is not None:
                return known
            if progress is not None:
                progress(f"reading {source} ({sum(p.stat().st_size for p in paths if p.is_file()) / 2**20:.1f} MiB)")
            with self._lock:
                if handle is None:
                    self._counter += 1
                    handle = f"{chosen[0]}{self._counter}"
            entry = self._load(source, paths, chosen, cycle, key, handle)
            with self._lock:
                self._entries[entry.handle] = entry
                self._by_key[key] = entry.handle
                self._released.pop(entry.handle, None)
                self._evict(keep=entry.handle)
            return entry

    def _known(self, key: tuple[Any, ...]) -> Entry | None:
        with self._lock:
            known = self._by_key.get(key)
            if known is None or known not in self._entries:
                return None
            self._entries.move_to_end(known)
            return self._entries[known]

    def _kind(self, source: str, paths: list[Path], kind: str) -> Kind:
        if kind != "auto":
            return kind  # type: ignore[return-value]
        if len(paths) == 1 and paths[0].is_file() and paths[0].suffix in SNAPSHOT_SUFFIXES:
            return "snapshot"
        if len(paths) > 1:
            return "job"
        if paths[0].is_dir() or any(c in source for c in "*?["):
            from traceinsight.trace.layout import resolve

            return "job" if resolve(str(paths[0])).kind == "job" else "trace"
        return "trace"

    def _load(self, source: str, paths: list[Path], kind: Kind, cycle: str, key: tuple[Any, ...], handle: str) -> Entry:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.perf_counter()
            data, size = self._read(source, paths, kind, cycle)
            load_s = time.perf_counter() - started
        notes = [str(w.message) for w in caught]
        if kind == "job":
            notes += list(data.spec.warnings)
        return Entry(handle, kind, source, key, data, size, load_s, cycle, tuple(dict.fromkeys(notes)))

    def _read(self, source: str, paths: list[Path], kind: Kind, cycle: str) -> tuple[Any, int]:
        import traceinsight as ti

        data: Any
        size: int
        if kind == "snapshot":
            if len(paths) != 1 or not paths[0].is_file():
                raise UsageError(f"{source}: a snapshot is one pickle file")
            data = ti.load_memory_snapshot(paths[0])
            size = _frames_bytes([data.segments, data.blocks, data.events, data.frames])
        elif kind == "job":
            target: Any = [str(p) for p in paths] if len(paths) > 1 else str(paths[0])
            # Ranks missing from the files (a sample of a large job) are named in the notes.
            data = ti.load_job(target, jobs=self.jobs, cache=self.cache, cycle=_cycle(cycle), allow_missing=True)
            size = JOB_RANK_BYTES * max(1, len(data.summaries))
        else:
            if len(paths) != 1:
                raise UsageError(f"{source}: names {len(paths)} files; open them as a job (kind 'job')")
            data = ti.load(paths[0], cache=self.cache, cycle=_cycle(cycle))
            size = _frames_bytes([data.events, data.kernels, data.counters, data.memory])
        return data, size

    def _evict(self, *, keep: str) -> None:
        """Release the least recently used entries past the cap (the caller holds the lock)."""
        while sum(e.bytes for e in self._entries.values()) > self.max_bytes and len(self._entries) > 1:
            oldest = next(h for h in self._entries if h != keep)
            entry = self._entries.pop(oldest)
            self._by_key.pop(entry.key, None)
            self._released[oldest] = (entry.source, entry.kind, entry.cycle)


def _cycle(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _looks_like_handle(text: str) -> bool:
    return len(text) >= 2 and text[0] in "tjs" and text[1:].isdigit()
