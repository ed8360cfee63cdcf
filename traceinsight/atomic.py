"""Writing a file atomically, for every layer: the library's ``write_html`` / ``write_json``
methods, the commands' ``-o FILE`` and the traces that capture writes go through here."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def write_atomic(content: str | bytes, path: str | os.PathLike[str]) -> None:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary file beside it, so a
    reader never sees half a file and a failed write leaves the old file (or none)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with open_atomic(path) as handle:
        handle.write(data)


@contextmanager
def open_atomic(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file that takes the place of ``path`` once the block ends without an error.

    A symbolic link stays a link: the file it points to is replaced. A path that is not a
    regular file (``/dev/null``, ``/dev/stdout``, a named pipe) cannot be replaced, and must
    not be (as root, a rename would put a plain file in place of the device): it is written
    in place. A new file gets the mode a plain ``open()`` would give it; an existing one keeps
    its mode.
    """
    if _is_special(path):
        with open(path, "wb") as handle:
            yield handle
        return
    target = Path(os.path.realpath(path))
    mode = _mode_for(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)  # mkstemp makes the file private
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def is_regular_or_new(path: str | os.PathLike[str]) -> bool:
    """Whether writing ``path`` makes or replaces a plain file (not a device or a pipe)."""
    return not _is_special(path)


def _is_special(path: str | os.PathLike[str]) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # nothing there yet (or a dangling link): a new file is made
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
