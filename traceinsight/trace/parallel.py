"""Decoding the pieces of a big trace on several cores.

msgspec holds the GIL while it decodes, so threads cannot share the work: helper processes
do. Each is a fresh interpreter (``python -m traceinsight.trace.decode_helper``, so nothing of
the user's script is run again in it) that maps the same file, writes the same brackets into its
private copy of the pages, and takes pieces from a counter shared through a locked file, as
the parent does. A decoded piece (its polars frame and its small state: names, counters,
memory events) is written to spool files in shared memory: the frame as Arrow IPC (three
times quicker to write than a pickle of it), the state pickled. Pushing the frames through a
pipe instead made the helper wait for the parent's reading thread, which waits for the GIL.
Pieces are merged in file order, so the result does not depend on who decoded what.

A helper that dies or stops writing loses nothing: the parent decodes the pieces it had
taken. A piece that is not valid JSON (a cut fell inside a string) stops the helpers, and
the caller decodes the file in one process, which knows how to recover.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import polars as pl

from traceinsight.trace import progress
from traceinsight.trace.chunking import Plan, decode_piece, restore
from traceinsight.trace.columns import ChunkState
from traceinsight.trace.lenient import BadCut
from traceinsight.trace.source import Buffer

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no helpers
    fcntl = None  # type: ignore[assignment]

# Below this many pieces (of CHUNK_BYTES), starting a process costs more than it saves.
MIN_PIECES = 8
# Each helper holds one piece's Python objects and a frame at a time: a few hundred MB at
# most, so their number is capped as well as tied to the cores.
MAX_HELPERS = 3
# A helper that has delivered nothing for this long is taken for hung; its pieces are redone.
_SILENCE_S = 120.0
WORKERS_ENV = "TRACEINSIGHT_DECODE_WORKERS"
_FAILED = "failed"

PieceResult = tuple[pl.DataFrame | None, ChunkState]


class PieceFailed(Exception):
    """A helper found a piece that is not valid JSON, or could not read the file."""


def helpers_for(plan: Plan, data: Buffer, requested: int | None) -> int:
    """How many helper processes to start: none for a small trace, or one whose text is not
    in a map a helper can open (a gzip trace where no in-memory file could be made), else
    one per spare core."""
    if requested is None:
        env = os.environ.get(WORKERS_ENV, "").strip()
        requested = int(env) - 1 if env.isdigit() and int(env) > 0 else None
    if fcntl is None or not isinstance(data, mmap.mmap) or plan.pieces < MIN_PIECES:
        return 0
    spare = _cores() - 1 if requested is None else requested
    return max(0, min(spare, MAX_HELPERS, plan.pieces // MIN_PIECES))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def decode_parallel(
    path: Path,
    data: Buffer,
    plan: Plan,
    header: dict[str, Any],
    helpers: int,
) -> list[PieceResult]:
    """Every piece of ``plan`` as (frame, state), in order. Raises :class:`PieceFailed`
    when a piece is not valid JSON or a helper could not read the file."""
    last = plan.pieces - 1
    shared = last  # the last piece carries the end of the file: the parent decodes it
    # The helpers' pieces wait there as columns: about half the JSON's size at most.
    spool = Path(tempfile.mkdtemp(prefix="traceinsight-decode-", dir=_spool_root(plan.size)))
    counter = spool / "next"
    counter.write_bytes(b"0")
    procs: list[subprocess.Popen[bytes]] = []
    view = memoryview(data)
    patches = plan.patch(data)

    def release(index: int) -> None:
        # a helper's piece: its text is of no more use here either (a gunzipped text's
        # pages are freed for every process)
        plan.release(data, index)

    try:
        for number in range(helpers):
            procs.append(_start_helper(path, _map_path(path, data), plan, shared, spool, number))
        results: dict[int, PieceResult] = {}
        results[last] = consume_piece(_decode(path, view, plan, last, header))
        plan.release(data, last)
        decoded_events = 0
        done_bytes = 0
        while (index := _claim(counter, shared)) is not None:
            events = _decode(path, view, plan, index, header)
            decoded_events += len(events)
            results[index] = consume_piece(events)
            del events
            plan.release(data, index)
            done_bytes += plan.end(index) - plan.start(index)
            progress.report("decoding", done_bytes, len(data), decoded_events)
            # read the helpers' pieces while they still decode, not all at the end
            _collect(spool, results, release)
        _wait(procs, spool, results, release)
        failed = spool / _FAILED
        if failed.exists():
            raise PieceFailed(failed.read_text(errors="replace").strip())
        _collect(spool, results, release)
        # Pieces a helper took but did not deliver (it died or hung): decode them here.
        for index in range(plan.pieces):
            if index not in results:
                results[index] = consume_piece(_decode(path, view, plan, index, header))
                plan.release(data, index)
        progress.report("decoding", len(data), len(data), decoded_events)
        return [results[i] for i in range(plan.pieces)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(spool, ignore_errors=True)
        del view
        restore(data, patches)


def _map_path(path: Path, data: Buffer) -> str:
    """What a helper maps: the file itself, or the in-memory text of a gunzipped one."""
    return getattr(data, "helper_path", None) or str(path)


def _start_helper(
    path: Path, map_path: str, plan: Plan, shared: int, spool: Path, number: int
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    # Polars' allocator returns freed pages within milliseconds (see docs/trace-model.md);
    # the helper is our own process, so it gets that whatever the caller's program chose.
    env.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")
    # the helper imports this very package, wherever the parent found it
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with (spool / f"helper{number}.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "traceinsight.trace.decode_helper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    assert proc.stdin is not None
    pickle.dump((str(path), map_path, plan, shared, str(spool), os.getpid()), proc.stdin)
    proc.stdin.close()
    return proc


def _wait(
    procs: list[subprocess.Popen[bytes]],
    spool: Path,
    results: dict[int, PieceResult],
    done: Callable[[int], None],
) -> None:
    """Until every helper has exited, reading the pieces they deliver meanwhile; one that
    delivers nothing for _SILENCE_S is killed."""
    heard = time.monotonic()
    while any(proc.poll() is None for proc in procs):
        if _collect(spool, results, done):
            heard = time.monotonic()
        elif time.monotonic() - heard > _SILENCE_S:
            for proc in procs:
                proc.kill()
            return
        else:
            time.sleep(0.005)


def _collect(spool: Path, results: dict[int, PieceResult], done: Callable[[int], None]) -> int:
    """Read the pieces delivered to ``spool`` so far into ``results``, calling ``done`` with
    each one's index; how many."""
    found = 0
    for spooled in spool.glob("*.pickle"):
        index = int(spooled.stem)
        results[index] = _read_spooled(spooled)
        done(index)
        found += 1
    return found


def _spool_root(need_bytes: int = 0) -> str | None:
    """/dev/shm when it has room for ``need_bytes`` (containers often give it only 64 MB),
    else the temporary directory."""
    shm = "/dev/shm"
    try:
        stat = os.statvfs(shm)
    except OSError:
        return None
    room = stat.f_bavail * stat.f_frsize
    return shm if os.access(shm, os.W_OK) and room >= need_bytes else None


def _decode(
    path: Path, view: memoryview, plan: Plan, index: int, header: dict[str, Any]
) -> list[Any]:
    try:
        return decode_piece(path, view, plan, index, header)
    except BadCut:
        raise PieceFailed("a piece of the events array is not valid JSON") from None


def _claim(counter: Path, shared: int) -> int | None:
    """The next piece nobody has taken, or None; the counter file is locked meanwhile."""
    with counter.open("r+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        index = int(handle.read() or b"0")
        if index >= shared:
            return None
        handle.seek(0)
        handle.write(str(index + 1).encode())
        handle.truncate()
    return index  # the lock goes with the close


def _helper(
    path_text: str, map_path: str, plan: Plan, shared: int, spool_text: str, parent: int
) -> None:
    """A helper process: decode claimed pieces of the file until none are left."""
    import gc

    from traceinsight.errors import TraceFormatError

    gc.disable()  # as in the parent: millions of short-lived objects, no cycles
    path, spool = Path(path_text), Path(spool_text)
    counter = spool / "next"
    with open(map_path, "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    if len(data) != plan.size:
        _fail(spool, f"{path} changed while it was being read")
        return
    plan.patch(data)
    view = memoryview(data)
    while os.getppid() == parent and (index := _claim(counter, shared)) is not None:
        try:
            events = decode_piece(path, view, plan, index, {})
        except BadCut:
            _fail(spool, "a piece of the events array is not valid JSON")
            return
        except TraceFormatError as exc:
            _fail(spool, str(exc))
            return
        frame, state = consume_piece(events)
        del events
        plan.release(data, index)
        _spool_piece(spool, index, frame, state)
        del frame, state


def _fail(spool: Path, message: str) -> None:
    (spool / _FAILED).write_text(message)


def _spool_piece(spool: Path, index: int, frame: pl.DataFrame | None, state: ChunkState) -> None:
    """The frame to ``index.arrow``, then the state to ``index.pickle``: the parent lists
    *.pickle, and a file appears under its name only once it is whole."""
    if frame is not None:
        partial = spool / f"{index}.arrow.partial"
        frame.write_ipc(partial, compression="uncompressed")
        partial.rename(spool / f"{index}.arrow")
    partial = spool / f"{index}.pickle.partial"
    with partial.open("wb") as handle:
        pickle.dump((frame is not None, state), handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.rename(spool / f"{index}.pickle")


def _read_spooled(spooled: Path) -> PieceResult:
    with spooled.open("rb") as handle:
        has_frame, state = pickle.load(handle)
    spooled.unlink()
    frame: pl.DataFrame | None = None
    if has_frame:
        arrow = spooled.with_suffix(".arrow")
        frame = pl.read_ipc(arrow)
        arrow.unlink()
    return frame, state


def consume_piece(events: list[Any]) -> PieceResult:
    """A piece's events as its duration frame and the state it gathered on its own."""
    state = ChunkState([])
    return state.consume(events), state


def helper_main(stdin: IO[bytes]) -> int:
    """The helper's entry point (see :mod:`.decode_helper`): its task comes on stdin."""
    path_text, map_path, plan, shared, spool_text, parent = pickle.load(stdin)
    with contextlib.suppress(FileNotFoundError):  # the parent gave up and removed the spool
        _helper(path_text, map_path, plan, shared, spool_text, parent)
    return 0
