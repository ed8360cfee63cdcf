"""Terminal text: what a command prints on a terminal, as plain text when written to a file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import ALL_KINDS, RenderOptions


@dataclass(frozen=True)
class TerminalFormat:
    name: str = "terminal"
    suffixes: tuple[str, ...] = (".txt",)
    binary: bool = False
    kinds: tuple[str, ...] = ALL_KINDS
    label: str = "terminal"

    def render(self, document: Any, options: RenderOptions) -> str:
        from traceinsight.render.kinds import terminal_text

        return terminal_text(document, width=options.width)


FORMAT = TerminalFormat()
