"""HTML: a self-contained page with plots (``DocumentKind.html``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import RenderOptions


@dataclass(frozen=True)
class HtmlFormat:
    name: str = "html"
    suffixes: tuple[str, ...] = (".html", ".htm")
    binary: bool = False
    kinds: tuple[str, ...] = ("report", "diff", "job", "series", "memory_snapshot")
    label: str = "html (self-contained page with plots)"

    def render(self, document: Any, options: RenderOptions) -> str:
        from traceinsight.render.kinds import document_kind

        html = document_kind(document).html
        assert html is not None, "a kind the HTML format lists has an HTML view"
        return html(document, options.trace)


FORMAT = HtmlFormat()
