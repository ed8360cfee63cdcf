"""Writing a file atomically, for every layer: the library's ``write_html`` / ``write_json``
methods and the commands' ``-o FILE`` write through the same function."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(content: str | bytes, path: str | os.PathLike[str]) -> None:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary file beside it, so a
    reader never sees half a file and a failed write leaves the old file (or none)."""
    target = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp makes the file private; give it the mode a plain open() would have.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
