"""What an output format is: a renderer object the format registry holds.

A format module imports nothing heavy at its top (the CLI builds its ``--format`` help from the
registry before any trace is read); its ``render`` imports what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from traceinsight.trace.model import Trace

# Every kind of document the commands write (``render/envelope.py``'s ``Kind``).
ALL_KINDS = ("report", "diff", "gaps", "bound", "compile", "whatif", "sql", "job", "series", "memory_snapshot")


@dataclass(frozen=True)
class RenderOptions:
    """What shapes a document's output beside the document: ``width`` of terminal text written
    to a string (None: the kind's own), ``trace`` for a report's HTML plots, ``top`` rows per
    table of a diff's Markdown."""

    width: int | None = None
    trace: Trace | None = None
    top: int = 8


class OutputFormat(Protocol):
    """A format: its ``--format`` name, the file suffixes that name it (the first is the one it
    writes), whether it is binary, the document kinds it writes, a few words for the help, and
    how it renders any of those documents."""

    @property
    def name(self) -> str: ...
    @property
    def suffixes(self) -> tuple[str, ...]: ...
    @property
    def binary(self) -> bool: ...
    @property
    def kinds(self) -> tuple[str, ...]: ...
    @property
    def label(self) -> str: ...

    def render(self, document: Any, options: RenderOptions) -> str | bytes: ...
