"""Opening a trace file: its bytes as a writable buffer (a private file map, or gunzipped)."""

from __future__ import annotations

import mmap
import os
import re
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

from traceinsight.errors import TraceFormatError
from traceinsight.trace import progress

FIRST_TOKEN = re.compile(rb"\s*(\S)")

_inflate: ModuleType
try:  # ISA-L inflates gzip about twice as fast as zlib (0.42 s against 0.93 s for 453 MB of JSON)
    from isal import isal_zlib

    _inflate = isal_zlib
except ImportError:  # a platform without its wheels (it is a dependency where they exist)
    _inflate = zlib
_INFLATE_ERRORS: tuple[type[Exception], ...] = tuple({zlib.error, _inflate.error})

Buffer = bytearray | mmap.mmap


def read_bytes(path: Path) -> Buffer:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by suffix).

    A writable buffer, because the decoder writes array brackets into it to cut the events
    into chunks without copying them: a private copy-on-write map of a plain file (pages are
    handed back to the OS as soon as they are decoded, so the file never sits in memory
    whole). A gzip file is decompressed into an anonymous in-memory file (Linux), mapped the
    same way, so that decode helpers can map it too (see :class:`Gunzipped`); elsewhere, into
    a bytearray.
    """
    if not path.exists():
        raise TraceFormatError(path, "no such file")
    if path.is_dir():
        raise TraceFormatError(path, "is a directory, not a trace file")
    try:
        with path.open("rb") as handle:
            magic = handle.read(2)
            handle.seek(0)
            data = _gunzip(path, handle) if magic == b"\x1f\x8b" else _map(handle)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    if FIRST_TOKEN.match(data) is None:
        raise TraceFormatError(path, "file is empty")
    return data


def _map(handle: Any) -> Buffer:
    if os.fstat(handle.fileno()).st_size == 0:
        return bytearray()
    return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)


def release_pages(data: Buffer, lo: int, hi: int) -> None:
    """Drop the whole pages inside data[lo:hi] from this process's memory (a no-op for a
    bytearray).

    Pages of a private file map come back from the page cache if read again; pages we wrote
    brackets into are never inside a released range (it stops short of both ends).
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    first, last = _inner_pages(lo, hi)
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)


def discard_pages(data: Buffer, lo: int, hi: int) -> None:
    """Drop the whole pages inside data[lo:hi] for good: decoded text that nobody reads again.

    For a plain file this is :func:`release_pages`. A gunzipped text has no file behind its
    pages, so they are freed from its in-memory file as well (not only from this process's
    map), and :func:`restore_discarded` decompresses them again should a fall-back decode
    need the whole text.
    """
    release_pages(data, lo, hi)
    if isinstance(data, Gunzipped):
        data.discard(lo, hi)


def restore_discarded(data: Buffer) -> None:
    """Bring back the text :func:`discard_pages` freed, before the whole of it is read again."""
    if isinstance(data, Gunzipped):
        data.refill()


def _inner_pages(lo: int, hi: int) -> tuple[int, int]:
    page = mmap.PAGESIZE
    return -(-lo // page) * page, (hi // page) * page


class Gunzipped(mmap.mmap):
    """A gzip trace's text in an anonymous in-memory file (``memfd``), privately mapped.

    ``helper_path`` opens the same memory from another process of this user, so decode
    helpers map the text instead of decompressing the file again; the memory is freed once
    this map and its descriptor are closed (``close()``, or when it is garbage collected).
    Pages of text already decoded can be freed early (:meth:`discard`): they would otherwise
    stay in memory, beside the columns made from them, until the whole decode ends.
    """

    helper_path: str
    source: Path
    _fd: int
    _holes: mmap.mmap | None = None  # a shared map of the memory file, to free its pages

    def discard(self, lo: int, hi: int) -> None:
        """Free the whole pages inside [lo, hi) of the in-memory file (they read as zeros
        until :meth:`refill`)."""
        first, last = _inner_pages(lo, hi)
        if last <= first or not hasattr(mmap, "MADV_REMOVE") or getattr(self, "_fd", -1) < 0:
            return
        if self._holes is None:
            try:
                self._holes = mmap.mmap(self._fd, len(self), access=mmap.ACCESS_WRITE)
            except OSError:
                return
        try:
            self._holes.madvise(mmap.MADV_REMOVE, first, last - first)
        except OSError:
            return  # the kernel cannot free them: they simply stay

    def refill(self) -> None:
        """Decompress the source again into the in-memory file, when pages were discarded."""
        if self._holes is None:
            return
        size = len(self)
        written = 0

        def put(chunk: bytes) -> None:
            nonlocal written
            if written + len(chunk) > size:
                raise TraceFormatError(self.source, "file changed while it was being read")
            _write_all(self._fd, chunk)
            written += len(chunk)

        os.lseek(self._fd, 0, os.SEEK_SET)  # the same text again, over the old
        try:
            with self.source.open("rb") as handle:
                _decompress(self.source, handle, put)
        except OSError as exc:
            raise TraceFormatError(self.source, f"cannot read again: {exc.strerror or exc}") from exc
        if written != size:
            raise TraceFormatError(self.source, "file changed while it was being read")
        # Pages of the private map that this process wrote (the cut brackets) keep its copy;
        # they are never discarded, so every other page now reads the text again.
        self._holes.close()
        self._holes = None

    def close(self) -> None:
        if self._holes is not None:
            self._holes.close()
            self._holes = None
        super().close()
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            os.close(fd)


def _gunzip(path: Path, handle: Any) -> Buffer:
    fd = _memfd()
    if fd is None:
        out = bytearray()
        _decompress(path, handle, out.extend)
        return out
    try:
        _decompress(path, handle, lambda chunk: _write_all(fd, chunk))
        size = os.fstat(fd).st_size
        if size == 0:
            os.close(fd)
            return bytearray()
        data = Gunzipped(fd, size, access=mmap.ACCESS_COPY)
    except BaseException:
        os.close(fd)
        raise
    data._fd = fd
    data.source = path
    data.helper_path = f"/proc/{os.getpid()}/fd/{fd}"
    return data


def _memfd() -> int | None:
    create = getattr(os, "memfd_create", None)
    if create is None or not os.path.isdir(f"/proc/{os.getpid()}/fd"):
        return None
    try:
        fd: int = create("traceinsight-gunzipped", getattr(os, "MFD_CLOEXEC", 0))
    except OSError:
        return None
    return fd


def _write_all(fd: int, chunk: bytes) -> None:
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view) :]


def _decompress(path: Path, handle: Any, sink: Any) -> None:
    decomp = _inflate.decompressobj(16 + zlib.MAX_WBITS)
    member_open = False
    size = os.fstat(handle.fileno()).st_size
    try:
        while piece := handle.read(1 << 22):
            progress.report("reading", handle.tell(), size)
            while piece:
                member_open = True
                sink(decomp.decompress(piece))
                if decomp.eof:  # a multi-member file: the next member starts here
                    piece = decomp.unused_data
                    decomp = _inflate.decompressobj(16 + zlib.MAX_WBITS)
                    member_open = False
                else:
                    piece = b""
    except _INFLATE_ERRORS as exc:
        raise TraceFormatError(path, f"corrupt gzip data ({exc})") from exc
    if member_open:
        raise TraceFormatError(
            path, "truncated gzip file (it ends before the compressed data does)"
        )
