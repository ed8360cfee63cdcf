"""Where command output goes: stdout, or a file that is never overwritten silently."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from traceinsight.atomic import is_regular_or_new, write_atomic
from traceinsight.errors import UsageError

if TYPE_CHECKING:
    from traceinsight.api import Trace
    from traceinsight.render.formats import Format


def check_writable(path: Path, *, force: bool) -> None:
    """Refuse to clobber an existing file unless asked to; checked before any work is done.

    A device or a pipe (``-o /dev/stdout``, ``/dev/null``) holds nothing to clobber."""
    if path.is_dir():
        raise UsageError(f"{path} is a directory")
    if path.exists() and not force and is_regular_or_new(path):
        raise UsageError(f"{path} exists; pass --force to overwrite it")
    if not path.parent.exists():
        raise UsageError(f"directory {path.parent} does not exist")


def write_output(content: str | bytes, path: Path | None, *, force: bool) -> None:
    """Write to ``path`` atomically (printing ``Wrote PATH``) or, without one, to stdout."""
    if path is None:
        if isinstance(content, bytes):
            sys.stdout.buffer.write(content)
        else:
            sys.stdout.write(content)
        sys.stdout.flush()
        return
    check_writable(path, force=force)
    write_atomic(content, path)
    if is_regular_or_new(path):  # not into the stream the content went to (-o /dev/stdout)
        typer.echo(f"Wrote {path}")


def emit(obj: object, fmt: Format, output: Path | None, *, trace: Trace | None = None, top: int = 8) -> None:
    """``obj`` (a document, or an analysis result it wraps) in ``fmt``: on the live terminal, as text on stdout, or into ``output``.

    The caller has already checked ``output`` (before the slow work).
    """
    from traceinsight.render import formats

    if fmt == "terminal" and output is None:
        formats.show(obj)
        return
    write_output(formats.render(obj, fmt, trace=trace, top=top), output, force=True)
