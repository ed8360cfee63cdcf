"""Snapshots as they travel: a gigabyte pickle is ~15x smaller gzip- or zstd-compressed.

The compression is told from the file's first bytes, not its name, so a renamed file still
reads. Decompression streams: the pickle is never held whole in memory.
"""

from __future__ import annotations

import gzip
import importlib
import struct
from pathlib import Path
from typing import IO, Any, cast

from traceinsight.errors import TraceFormatError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compression_of(path: str | Path) -> str | None:
    """``gzip``, ``zstd`` or None (a plain pickle), from the file's magic bytes."""
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head == ZSTD_MAGIC:
        return "zstd"
    return None


def open_snapshot(path: str | Path) -> IO[bytes]:
    """The file's pickle bytes, decompressed as they are read when the file is compressed."""
    kind = compression_of(path)
    if kind == "gzip":
        return cast(IO[bytes], gzip.open(path, "rb"))
    if kind == "zstd":
        return _zstd_reader(path)
    return open(path, "rb")


def _zstd_reader(path: str | Path) -> IO[bytes]:
    try:
        # Optional: Python 3.11 has no zstd of its own; the ``zstandard`` package reads it.
        zstandard: Any = importlib.import_module("zstandard")
    except ImportError:
        raise TraceFormatError(
            path,
            "is zstd-compressed and the zstandard package is not installed "
            "(pip install zstandard, or decompress it first: zstd -d FILE)",
        ) from None
    raw = open(path, "rb")  # noqa: SIM115 - handed to the reader, closed with it
    reader: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    return reader


def uncompressed_size(path: str | Path) -> int:
    """The pickle's size in bytes: the file's own, or for gzip the size its trailer records
    (modulo 4 GiB, so a wrapped value is replaced by 15x the file, the usual ratio)."""
    file_bytes = Path(path).stat().st_size
    kind = compression_of(path)
    if kind is None:
        return file_bytes
    if kind == "gzip" and file_bytes >= 18:
        with open(path, "rb") as handle:
            handle.seek(-4, 2)
            (recorded,) = struct.unpack("<I", handle.read(4))
        if recorded >= file_bytes:
            return int(recorded)
    return file_bytes * 15
