"""Terminal text: what a command prints on a terminal, as plain text when written to a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceinsight.render.outputs.base import ALL_KINDS, RenderOptions

if TYPE_CHECKING:
    from traceinsight.render.document import Document


@dataclass(frozen=True)
class TerminalFormat:
    name: str = "terminal"
    suffixes: tuple[str, ...] = (".txt",)
    binary: bool = False
    kinds: tuple[str, ...] = ALL_KINDS
    label: str = "terminal"

    def render(self, document: Document, options: RenderOptions) -> str:
        from traceinsight.render.report_documents import terminal_text

        return terminal_text(document, width=options.width)


FORMAT = TerminalFormat()
