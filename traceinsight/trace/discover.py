"""Find the rank traces of one job: from a directory, a glob, or a list of files or URLs.

What a directory or glob holds (one trace, profiler cycles, ranks of a job, a mix) is sorted
out by :mod:`traceinsight.trace.layout`; this module expands the input, reads each file's head
and checks that a set of rank files is one job.

A trace's rank comes from its ``distributedInfo`` (rank, world_size, backend), read from the
head of the file without decoding its events (Kineto writes the top-level fields before
``traceEvents``); when the head has none, from the file name (``*.rank3.json.gz``,
``rank-3.json.gz``, ``worker3.*.pt.trace.json.gz``). A set of files that is not one job
(two world sizes, two name stems, a rank twice, ranks missing) is an error naming the files.

URLs (``s3://...``, ``gs://...``) are read through fsspec when it is installed; ``fetch``
copies one to a local file once, keyed by its URL and size, so the Parquet cache applies.
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceinsight.errors import TraceInsightError
from traceinsight.trace.inputs import TRACE_SUFFIXES, has_glob, is_url, shape_of

__all__ = ["TRACE_SUFFIXES", "JobDiscoveryError", "JobSpec", "RankFile", "expand", "fetch", "inspect", "is_url", "job_spec"]

# Enough of a file to hold Kineto's top-level fields (device properties come first).
HEAD_BYTES = 256 * 1024
# Name patterns, most specific first: the rank number and the rest of the name as the stem.
_NAME_PATTERNS = (
    re.compile(r"^(?P<stem>.*?)[._-]?rank[._-]?(?P<rank>\d+)(?P<rest>.*)$", re.IGNORECASE),
    re.compile(r"^(?P<stem>.*?)[._-]?worker[._-]?(?P<rank>\d+)(?P<rest>.*)$", re.IGNORECASE),
)
_DIST = re.compile(rb'"distributedInfo"\s*:\s*\{')


class JobDiscoveryError(TraceInsightError):
    """The files given do not make up the ranks of one job."""


@dataclass(frozen=True)
class RankFile:
    """One rank's trace: where it is, its rank, and how the rank was found."""

    path: str
    rank: int
    world_size: int | None = None
    backend: str | None = None
    rank_from: str = "distributedInfo"  # or "file name"
    stem: str | None = None  # the file name without its rank part, when the name has one

    @property
    def is_url(self) -> bool:
        return is_url(self.path)


@dataclass(frozen=True)
class JobSpec:
    """The ranks of one job, sorted by rank."""

    ranks: tuple[RankFile, ...]
    world_size: int
    backend: str | None = None
    name: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self.ranks]


def _is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


def expand(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """Trace files named by a directory, a glob, a file, a URL, or a list of those."""
    items: Iterable[str | os.PathLike[str]] = (
        [source] if isinstance(source, (str, os.PathLike)) else source
    )
    found: list[str] = []
    for item in items:
        text = os.fspath(item)
        shape = shape_of(text)  # the one rule (trace/inputs.py)
        if is_url(text):
            found.extend(_expand_url(text))
        elif shape == "pattern":
            found.extend(sorted(p for p in globlib.glob(text) if _is_trace_name(p)))
        elif shape == "directory":
            found.extend(sorted(str(p) for p in Path(text).iterdir() if p.is_file() and _is_trace_name(p.name)))
        else:
            found.append(text)
    if not found:
        raise JobDiscoveryError(f"{_label(source)}: no trace files (*.json, *.json.gz) found")
    return list(dict.fromkeys(found))


def _label(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    names = [os.fspath(s) for s in source]
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def _fs(url: str) -> Any:
    try:
        import fsspec
    except ImportError as exc:
        raise JobDiscoveryError(f"{url}: reading URLs needs fsspec (pip install fsspec)") from exc
    return fsspec.core.url_to_fs(url)


def _expand_url(url: str) -> list[str]:
    fs, path = _fs(url)
    protocol = url.split("://", 1)[0]

    def full(p: str) -> str:
        return p if is_url(p) else f"{protocol}://{p}"

    if has_glob(path):
        return sorted(full(p) for p in fs.glob(path) if _is_trace_name(p))
    if fs.isdir(path):
        return sorted(full(p) for p in fs.ls(path, detail=False) if _is_trace_name(p))
    return [url]


def read_head(path: str, limit: int = HEAD_BYTES) -> bytes:
    """The first ``limit`` bytes of a trace's JSON text (decompressed when gzipped)."""
    if is_url(path):
        fs, inner = _fs(path)
        with fs.open(inner, "rb") as handle:
            raw = bytes(handle.read(limit))
    else:
        with open(path, "rb") as handle:
            raw = handle.read(limit)
    if raw[:2] == b"\x1f\x8b":
        # A partial gzip stream: decompress what is there, as far as it goes.
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, limit)
    return raw


def distributed_info(head: bytes) -> dict[str, Any] | None:
    """The ``distributedInfo`` object in the head of a trace, or None."""
    match = _DIST.search(head)
    if match is None:
        return None
    start = match.end() - 1
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(head)):
        ch = head[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:  # backslash
                escaped = True
            elif ch == 0x22:
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch == 0x7B:
            depth += 1
        elif ch == 0x7D:
            depth -= 1
            if depth == 0:
                try:
                    info = json.loads(head[start : i + 1])
                except ValueError:
                    return None
                return info if isinstance(info, dict) else None
    return None


def rank_from_name(path: str) -> tuple[int, str] | None:
    """(rank, stem) from a file name like ``x.rank3.json.gz`` or ``worker3.123.pt.trace.json``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for pattern in _NAME_PATTERNS:
        match = pattern.match(name)
        if match:
            return int(match.group("rank")), match.group("stem")
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def inspect(path: str) -> RankFile:
    """The rank of one trace file, from its head or else its name; raises when neither says."""
    try:
        head = read_head(path)
    except OSError as exc:
        raise JobDiscoveryError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except zlib.error as exc:
        raise JobDiscoveryError(f"{path}: not a readable gzip file ({exc})") from exc
    info = distributed_info(head) or {}
    named = rank_from_name(path)
    stem = named[1] if named else None
    rank = _int(info.get("rank"))
    world = _int(info.get("world_size"))
    backend = info.get("backend") if isinstance(info.get("backend"), str) else None
    if rank is not None:
        return RankFile(path, rank, world, backend, "distributedInfo", stem)
    if named is not None:
        return RankFile(path, named[0], world, backend, "file name", stem)
    raise JobDiscoveryError(
        f"{path}: no rank in distributedInfo or in the file name (expected e.g. name.rank3.json.gz)"
    )


def _names(files: Iterable[RankFile], limit: int = 4) -> str:
    paths = [f.path for f in files]
    shown = ", ".join(paths[:limit])
    return shown + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")


def job_spec(files: Sequence[RankFile], *, allow_missing: bool = False) -> JobSpec:
    """The job made of ``files``; raises :class:`JobDiscoveryError` when they are not one job."""
    worlds = {f.world_size for f in files if f.world_size is not None}
    if len(worlds) > 1:
        by_world = {w: [f for f in files if f.world_size == w] for w in sorted(worlds)}
        parts = "; ".join(f"world size {w}: {_names(fs, 2)}" for w, fs in by_world.items())
        raise JobDiscoveryError(f"traces of different jobs mixed ({parts})")
    stems = {f.stem for f in files if f.stem is not None}
    if len(stems) > 1:
        raise JobDiscoveryError(
            f"traces of different jobs mixed (names {', '.join(repr(s) for s in sorted(stems))}): "
            f"{_names(files)}"
        )
    seen: dict[int, RankFile] = {}
    for f in files:
        if f.rank in seen:
            raise JobDiscoveryError(f"rank {f.rank} appears twice: {seen[f.rank].path}, {f.path}")
        seen[f.rank] = f
    ranks = tuple(sorted(files, key=lambda f: f.rank))
    world_size = worlds.pop() if worlds else max(seen) + 1
    warnings: list[str] = []
    missing = sorted(set(range(world_size)) - set(seen))
    extra = sorted(r for r in seen if r >= world_size)
    if extra:
        raise JobDiscoveryError(f"rank(s) {extra} not below world size {world_size}: {_names(ranks)}")
    if missing:
        text = f"rank(s) {_compact(missing)} of world size {world_size} missing among {_names(ranks)}"
        if not allow_missing:
            raise JobDiscoveryError(text)
        warnings.append(text)
    backends = {f.backend for f in files if f.backend}
    name = next(iter(stems), "") if stems else _job_name(Path(ranks[0].path).name)
    return JobSpec(
        ranks=ranks,
        world_size=world_size,
        backend=backends.pop() if len(backends) == 1 else None,
        name=name,
        warnings=tuple(warnings),
    )


_HANDLER_SUFFIX = re.compile(r"\.\d{10,19}\.pt\.trace\.json(?:\.gz)?$")


def _job_name(file_name: str) -> str:
    # tensorboard_trace_handler's names keep their time: it tells one cycle from the next.
    if (handler := _HANDLER_SUFFIX.search(file_name)) is not None:
        return file_name[: handler.start()] + handler.group(0).split(".pt.")[0]
    return file_name.split(".")[0]


def _compact(values: list[int]) -> str:
    shown = ", ".join(str(v) for v in values[:8])
    return shown + (f" (+{len(values) - 8} more)" if len(values) > 8 else "")


def fetch(url: str, cache_dir: Path | None = None) -> Path:
    """A local copy of the trace at ``url`` (downloaded once; the copy is keyed by URL and
    size so that the Parquet cache of the copy applies on the next run)."""
    if not is_url(url):
        return Path(url)
    from traceinsight.trace.cache import cache_root

    fs, inner = _fs(url)
    try:
        size = fs.size(inner)
    except (OSError, NotImplementedError):
        size = None
    key = hashlib.sha256(f"{url}|{size}".encode()).hexdigest()[:32]
    suffix = ".json.gz" if url.endswith(".gz") else ".json"
    root = cache_dir or cache_root() / "remote"
    local = root / f"{key}{suffix}"
    if local.is_file() and (size is None or local.stat().st_size == size):
        return local
    root.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(f".{local.name}.{os.getpid()}.part")
    try:
        fs.get_file(inner, str(tmp))
        os.replace(tmp, local)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise JobDiscoveryError(f"{url}: cannot download ({exc})") from exc
    return local
