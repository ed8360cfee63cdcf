"""Where command output goes: stdout, or a file that is never overwritten silently."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from traceinsight.errors import UsageError


def check_writable(path: Path, *, force: bool) -> None:
    """Refuse to clobber an existing file unless asked to; checked before any work is done."""
    if path.exists() and not force:
        raise UsageError(f"{path} exists; pass --force to overwrite it")
    if path.exists() and path.is_dir():
        raise UsageError(f"{path} is a directory")
    if not path.parent.exists():
        raise UsageError(f"directory {path.parent} does not exist")


def write_output(content: str | bytes, path: Path | None, *, force: bool) -> None:
    """Write to ``path`` (printing ``Wrote PATH``) or, without one, to stdout."""
    if path is None:
        if isinstance(content, bytes):
            sys.stdout.buffer.write(content)
        else:
            sys.stdout.write(content)
        sys.stdout.flush()
        return
    check_writable(path, force=force)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    typer.echo(f"Wrote {path}")
