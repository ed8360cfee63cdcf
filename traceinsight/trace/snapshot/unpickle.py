"""Reading a snapshot pickle without letting it run code.

A snapshot holds only dicts, lists, tuples, str, int, float, bool and None, all of which pickle
writes with opcodes of their own. Anything else reaches the unpickler through ``find_class``
(a class or function to call), which is how a crafted pickle runs code; we refuse every one.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import IO, Any, NoReturn

from traceinsight.errors import TraceFormatError


class SnapshotRefused(pickle.UnpicklingError):
    """The pickle asked for a class or function: not a snapshot, and never loaded."""


class _DataOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> NoReturn:
        raise SnapshotRefused(
            f"it asks to load {module}.{name}, which a memory snapshot never holds; refused (nothing was run)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise SnapshotRefused(
            "it refers to persistent objects, which a memory snapshot never holds; refused"
        )


def read_pickle(path: str | Path) -> Any:
    """The data in the pickle at ``path`` (any protocol up to 5), or a one-line
    :class:`TraceFormatError` naming the file when it is not plain data."""
    try:
        with open(path, "rb") as handle:
            return _load(handle)
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


def _load(handle: IO[bytes]) -> Any:
    return _DataOnlyUnpickler(handle).load()
