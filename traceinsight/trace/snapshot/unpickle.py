"""Reading a snapshot pickle without letting it run code.

A snapshot holds only dicts, lists, tuples, str, int, float, bool and None, all of which pickle
writes with opcodes of their own. Anything else reaches the unpickler through ``find_class``
(a class or function to call), which is how a crafted pickle runs code; we refuse every one.

A big snapshot can also be read in pieces (``drain``): while the unpickler works, the caller is
handed what has been built so far, takes what it can use, and names the objects the unpickler
may forget, so that their memory is given back before the rest of the file is read.
"""

from __future__ import annotations

import gc
import io
import pickle
import struct
import sys
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from operator import not_
from pathlib import Path
from typing import IO, Any, NoReturn

from traceinsight.errors import TraceFormatError
from traceinsight.trace.snapshot.compressed import open_snapshot

# A drain gets a copy of the unpickler's memo (index -> object) and returns the indices of the
# objects that the rest of the pickle will not refer to again.
Drain = Callable[[dict[int, Any]], Iterable[int]]
DRAIN_EVERY = 16 << 20


class SnapshotRefused(pickle.UnpicklingError):
    """The pickle asked for a class or function: not a snapshot, and never loaded."""


class ReadAgain(Exception):
    """A load with a drain could not finish: the pickle referred again to an object the drain
    let the unpickler forget, or the drain failed. Reading without a drain gives the answer."""


class _DataOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> NoReturn:
        raise SnapshotRefused(
            f"it asks to load {module}.{name}, which a memory snapshot never holds; refused (nothing was run)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise SnapshotRefused(
            "it refers to persistent objects, which a memory snapshot never holds; refused"
        )


class _MemoBuilder(pickle.Unpickler):
    """Fills its memo with given objects at given indices, from a pickle we write ourselves.

    CPython's ``Unpickler.memo = {...}`` cannot shrink a memo: it stores the entries in the table
    it is about to free and keeps an empty one (and an empty dict leaves a table of size 0 that
    the next put writes past). Copying another unpickler's memo proxy keeps every slot as it is,
    so the kept entries are put, one ``LONG_BINPUT`` each, into this unpickler's memo first.
    """

    def __init__(self, entries: list[tuple[int, Any]], filler: object = None) -> None:
        objects = [o for _, o in entries]
        indices = [i for i, _ in entries]
        order = list(range(len(entries)))
        if indices:
            # The table doubles the index that outgrows it, and the kept entries are the oldest
            # and the newest: a filler put first, half way up, sizes it once, close to the
            # largest index, instead of twice that (a table has a slot per object unpickled).
            half = max(indices) // 2 + 1
            if filler is not None and half > 32 and half not in set(indices):
                objects.append(filler)
                indices.append(half)
                order.insert(0, len(indices) - 1)
        # per entry: BININT k, BINPERSID (the k-th object), LONG_BINPUT index, POP
        entry = struct.Struct("<ci2sIc").pack
        body = b"".join(
            map(
                entry,
                repeat(b"J"),
                order,
                repeat(b"Qr"),
                map(indices.__getitem__, order),
                repeat(b"0"),
            )
        )
        super().__init__(io.BytesIO(body + b"N."))
        self.persistent_load = objects.__getitem__  # type: ignore[method-assign]
        self.load()

    def find_class(self, module: str, name: str) -> NoReturn:
        raise SnapshotRefused(f"{module}.{name}")  # our own opcodes never ask for one


class _Filler:
    """Stands in the memo where an object was let go; that the pickle got it is seen from the
    references to it once the load is done (one per load, so none is left from another)."""

    __slots__ = ()


class _DrainingReader:
    """The file as the unpickler reads it, calling ``drain`` every ``every`` bytes.

    The C unpickler reads a protocol 4/5 file one 64 KB frame at a time (older protocols, what
    the file's buffer holds, a few KB), so the drain runs between frames, with the load in
    progress."""

    def __init__(self, raw: IO[bytes], every: int, drain: Callable[[], None]) -> None:
        self._raw = raw
        self._every = every
        self._due = every
        self._count = 0
        self._drain = drain
        peek = getattr(raw, "peek", None)
        if peek is not None:
            # The unpickler prefetches with peek when the file has one (else it reads each
            # opcode with a call of its own), so it is offered only when there is one.
            self.peek = peek

    def _advance(self, n: int) -> None:
        self._count += n
        if self._count >= self._due:
            self._due = self._count + self._every
            self._drain()

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._advance(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        n: int = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        self._advance(n)
        return n

    def readline(self, size: int = -1) -> bytes:
        data = self._raw.readline(size)
        self._advance(len(data))
        return data


def read_pickle(
    path: str | Path, *, drain: Drain | None = None, drain_every: int = DRAIN_EVERY
) -> Any:
    """The data in the pickle at ``path`` (any protocol up to 5), or a one-line
    :class:`TraceFormatError` naming the file when it is not plain data.

    With ``drain``, the load is interrupted every ``drain_every`` bytes read to call it (see
    :data:`Drain`); :class:`ReadAgain` says to read the file again without one."""
    try:
        _sniff(path)
        with open_snapshot(path) as handle:
            return _load(handle, drain, drain_every)
    except SnapshotRefused as exc:
        raise TraceFormatError(path, f"not a memory snapshot: {exc}") from None
    except FileNotFoundError:
        raise TraceFormatError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a snapshot pickle") from None
    except PermissionError:
        raise TraceFormatError(path, "cannot be read (permission denied)") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        OSError,  # a corrupt gzip or zstd stream (gzip.BadGzipFile is one)
        ValueError,
        TypeError,
        IndexError,
        KeyError,
        AttributeError,
        MemoryError,
        UnicodeDecodeError,
    ) as exc:
        # A truncated or foreign file fails somewhere inside the unpickler; the message of each
        # failure is short, and the traceback says nothing more to the user.
        detail = str(exc) or type(exc).__name__
        raise TraceFormatError(path, f"not a readable pickle ({detail})") from None


# The first bytes of what people pass by mistake: a gzip'd or plain JSON trace.
_JSON_START = (b"{", b"[")


def _sniff(path: str | Path) -> None:
    """Say what the file is when it is plainly no pickle: the unpickler's own words ("Ran out
    of input", "invalid load key '{'") name neither the file's kind nor the way on. Read on the
    decompressed bytes: a gzipped snapshot is a snapshot, a gzipped trace is a trace. (A file of
    its own: a zstd stream cannot seek back.)"""
    with open_snapshot(path) as handle:
        head = handle.read(64)
    if not head:
        raise TraceFormatError(path, "file is empty")
    if head.lstrip().startswith(_JSON_START):
        raise TraceFormatError(
            path, "a profiler trace (JSON), not a memory snapshot pickle: read it with `traceinsight analyze`"
        )


def _load(handle: IO[bytes], drain: Drain | None, drain_every: int) -> Any:
    # Millions of dicts and lists are made and none is garbage until the end: the cyclic
    # collector would walk them again and again (about half the time of a plain load).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if drain is None:
            return _DataOnlyUnpickler(handle).load()
        return _load_draining(handle, drain, drain_every)
    finally:
        if was_enabled:
            gc.enable()


def _load_draining(handle: IO[bytes], drain: Drain, drain_every: int) -> Any:
    load = _DrainingLoad(drain)
    unpickler = _DataOnlyUnpickler(_DrainingReader(handle, drain_every, load.run_drain))
    if type(unpickler.memo).__name__ != "UnpicklerMemoProxy":
        # Not CPython's C unpickler: its memo cannot be pruned this way.
        return _DataOnlyUnpickler(handle).load()
    load.unpickler = unpickler
    try:
        data = unpickler.load()
    except SnapshotRefused:
        raise
    except (pickle.UnpicklingError, KeyError) as exc:
        if load.pruned:
            raise ReadAgain(str(exc)) from None
        raise
    finally:
        load.unpickler = None  # with its memo, and what it held of the filler
        del unpickler
    if sys.getrefcount(load.filler) > 2:  # load's, and getrefcount's argument
        raise ReadAgain("the pickle refers to an object it let go")
    return data


class _DrainingLoad:
    def __init__(self, drain: Drain) -> None:
        self.drain = drain
        self.pruned = False
        self.unpickler: _DataOnlyUnpickler | None = None
        self.filler = _Filler()

    def run_drain(self) -> None:
        unpickler = self.unpickler
        assert unpickler is not None
        memo = unpickler.memo.copy()
        try:
            found = self.drain(memo)
            drop = found if isinstance(found, (set, frozenset)) else set(found)
        except Exception as exc:
            raise ReadAgain(f"{type(exc).__name__}: {exc}") from exc
        if not drop:
            return
        # At C speed: a drain lets go of hundreds of thousands of entries.
        kept = list(compress(memo.items(), map(not_, map(drop.__contains__, memo))))
        del memo, found, drop
        # The old table (and the objects let go) is freed first, for a small one, so that the
        # old and the new never coexist.
        unpickler.memo = _MemoBuilder([]).memo
        builder = _MemoBuilder(kept, self.filler)
        del kept
        unpickler.memo = builder.memo
        del builder
        self.pruned = True
