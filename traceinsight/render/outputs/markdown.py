"""Markdown: a document's own Markdown view (the document's ``markdown``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceinsight.render.outputs.base import RenderOptions

if TYPE_CHECKING:
    from traceinsight.render.document import Document


@dataclass(frozen=True)
class MarkdownFormat:
    name: str = "md"
    suffixes: tuple[str, ...] = (".md", ".markdown")
    binary: bool = False
    kinds: tuple[str, ...] = ("report", "diff", "job", "series", "memory_snapshot")
    label: str = "md (Markdown)"

    def render(self, document: Document, options: RenderOptions) -> str:
        return document.markdown(options)


FORMAT = MarkdownFormat()
