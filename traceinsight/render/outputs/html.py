"""HTML: a self-contained page with plots (the document's ``html``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from traceinsight.render.outputs.base import RenderOptions

if TYPE_CHECKING:
    from traceinsight.render.document import Document


@dataclass(frozen=True)
class HtmlFormat:
    name: str = "html"
    suffixes: tuple[str, ...] = (".html", ".htm")
    binary: bool = False
    kinds: tuple[str, ...] = ("report", "diff", "job", "series", "memory_snapshot")
    label: str = "html (self-contained page with plots)"

    def render(self, document: Document, options: RenderOptions) -> str:
        return document.html(options)


FORMAT = HtmlFormat()
