"""Markdown: a document's own Markdown view (``DocumentKind.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import RenderOptions


@dataclass(frozen=True)
class MarkdownFormat:
    name: str = "md"
    suffixes: tuple[str, ...] = (".md", ".markdown")
    binary: bool = False
    kinds: tuple[str, ...] = ("report", "diff", "job", "series", "memory_snapshot")
    label: str = "md (Markdown)"

    def render(self, document: Any, options: RenderOptions) -> str:
        from traceinsight.render.kinds import document_kind

        md = document_kind(document).md
        assert md is not None, "a kind the Markdown format lists has a Markdown view"
        return md(document, options.top)


FORMAT = MarkdownFormat()
