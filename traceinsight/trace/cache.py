"""Parquet cache of loaded traces, keyed by the file's identity and the reader version.

A cache entry is a directory of one Parquet file per frame plus ``meta.json``. It is written
to a temporary directory and renamed into place, so a reader never sees half an entry; an
entry that fails to read for any reason is deleted and rebuilt, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import polars as pl

from traceinsight.trace.model import Trace, TraceMeta
from traceinsight.trace.schema import FRAME_SCHEMAS, READER_VERSION

ENV_CACHE_DIR = "TRACEINSIGHT_CACHE_DIR"


def cache_root() -> Path:
    override = os.environ.get(ENV_CACHE_DIR)
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("traceinsight"))


def cache_key(path: Path) -> str:
    stat = path.stat()
    ident = (
        f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|v{READER_VERSION}|pl{pl.__version__}"
    )
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def entry_dir(path: Path) -> Path:
    return cache_root() / cache_key(path)


def read(path: Path) -> Trace | None:
    """The cached trace for ``path``, or None when there is no valid entry."""
    entry = entry_dir(path)
    if not entry.is_dir():
        return None
    try:
        meta_data = json.loads((entry / "meta.json").read_text())
        meta = TraceMeta.from_dict(meta_data)
        frames = {}
        for name, schema in FRAME_SCHEMAS.items():
            frame = pl.read_parquet(entry / f"{name}.parquet")
            if list(frame.columns) != list(schema):
                raise ValueError(f"cached {name} has unexpected columns")
            frames[name] = frame
    except Exception:
        # A corrupt or foreign entry is never trusted: drop it and let the caller rebuild.
        shutil.rmtree(entry, ignore_errors=True)
        return None
    # the path as spelled this time: the key is the resolved path, so one entry serves all
    return Trace(meta=replace(meta, path=str(path), from_cache=True), **frames)


def write(path: Path, trace: Trace) -> Path | None:
    """Store ``trace`` for ``path``; returns the entry, or None if the cache is not writable."""
    entry = entry_dir(path)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
    except OSError:
        return None
    try:
        for name in FRAME_SCHEMAS:
            trace.frame(name).write_parquet(
                tmp / f"{name}.parquet", compression="lz4", statistics=False
            )
        (tmp / "meta.json").write_text(json.dumps(trace.meta.to_dict(), default=str))
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    return entry
