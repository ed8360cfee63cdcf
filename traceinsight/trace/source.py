"""Opening a trace file: its bytes as a writable buffer (a private file map, or gunzipped)."""

from __future__ import annotations

import mmap
import os
import re
import zlib
from pathlib import Path
from typing import Any

from traceinsight.errors import TraceFormatError
from traceinsight.trace import progress

FIRST_TOKEN = re.compile(rb"\s*(\S)")

Buffer = bytearray | mmap.mmap


def read_bytes(path: Path) -> Buffer:
    """The file's bytes, gunzipped when it is gzip (by magic number, not by suffix).

    A writable buffer, because the decoder writes array brackets into it to cut the events
    into chunks without copying them: a private copy-on-write map of a plain file (pages are
    handed back to the OS as soon as they are decoded, so the file never sits in memory
    whole), or a bytearray filled in place for gzip.
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
    """Drop the whole pages inside data[lo:hi] from memory (a no-op for a bytearray).

    Pages of a private file map come back from the page cache if read again; pages we wrote
    brackets into are never inside a released range (it stops short of both ends).
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    first = -(-lo // page) * page
    last = (hi // page) * page
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)


def _gunzip(path: Path, handle: Any) -> bytearray:
    out = bytearray()
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    member_open = False
    size = os.fstat(handle.fileno()).st_size
    try:
        while piece := handle.read(1 << 22):
            progress.report("reading", handle.tell(), size)
            while piece:
                member_open = True
                out += decomp.decompress(piece)
                if decomp.eof:  # a multi-member file: the next member starts here
                    piece = decomp.unused_data
                    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    member_open = False
                else:
                    piece = b""
    except zlib.error as exc:
        raise TraceFormatError(path, f"corrupt gzip data ({exc})") from exc
    if member_open:
        raise TraceFormatError(
            path, "truncated gzip file (it ends before the compressed data does)"
        )
    return out
