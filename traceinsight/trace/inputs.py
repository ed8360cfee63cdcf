"""The front door: what a command's or the API's input names, decided once.

Two steps, each in one place. :func:`shape_of` says what a path names before any file is read:
one file, a URL, a directory, a glob (a pattern that names no existing file), or several
files. What a directory, glob or list of files holds (one trace, the profiler cycles of one
process, the ranks of a job, over cycles) is then read from the files' heads by
``trace/layout.py``, whose ``resolve_inputs`` turns that into what ``analyze`` works on (one
trace, a job's ranks, or the cycles as a series of runs). ``api.load``, ``analyze``, the job
discovery (``trace/discover.py``) and the runs of ``compare`` (``engine/job.py``) all ask here.
An allocator snapshot (a pickle) is no trace: ``memory`` takes one file and reads it with
``trace/snapshot/``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

Shape = Literal["file", "url", "directory", "pattern", "files"]
Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

TRACE_SUFFIXES = (".json", ".json.gz")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_GLOB_CHARS = "*?["


def is_url(path: str) -> bool:
    return bool(_URL.match(path)) and not path.startswith("file://")


def has_glob(text: str) -> bool:
    return any(ch in text for ch in _GLOB_CHARS)


def shape_of(source: Source) -> Shape:
    """What ``source`` names, from its text and whether it exists (no file is read).

    A name that exists is a path even with glob characters in it (Lightning writes
    "[Strategy]" into its trace names); a URL with glob characters is a pattern, another URL
    one file (a URL's directory is listed when it is expanded); a name that does not exist and
    is no pattern is a file (reading it says it is missing)."""
    if not isinstance(source, (str, os.PathLike)):
        items = list(source)
        if len(items) != 1:
            return "files"
        source = items[0]
    text = os.fspath(source)
    if is_url(text):
        return "pattern" if has_glob(text) else "url"
    if Path(text).is_dir():
        return "directory"
    if has_glob(text) and not os.path.exists(text):
        return "pattern"
    return "file"


def names_many(source: Source) -> bool:
    """Whether ``source`` may name several traces (a directory, a glob, several files), whose
    layout must be read; a file or a URL is one trace."""
    return shape_of(source) in ("directory", "pattern", "files")


def is_single_trace(run: str | os.PathLike[str]) -> bool:
    """A run of a series given as one trace: a URL, or an existing ``.json``/``.json.gz`` file;
    anything else is a job (a directory, a glob, rank files), discovered as one."""
    text = os.fspath(run)
    return shape_of(text) == "url" or (Path(text).is_file() and text.endswith(TRACE_SUFFIXES))
