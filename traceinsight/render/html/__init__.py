"""HTML output: a self-contained report or diff page, and fragments for notebooks."""

from __future__ import annotations

from traceinsight.render.html.diff import render_diff_html
from traceinsight.render.html.page import result_html
from traceinsight.render.html.report import render_html

__all__ = ["render_diff_html", "render_html", "result_html"]
