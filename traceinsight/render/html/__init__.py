"""HTML output: the page's building blocks, the report page, and fragments for notebooks."""

from __future__ import annotations

from traceinsight.render.html.page import result_html
from traceinsight.render.html.report import render_html

__all__ = ["render_html", "result_html"]
