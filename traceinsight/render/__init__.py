"""Presentation: terminal, JSON, Markdown, HTML and Perfetto output of traceinsight's results.

Importing this package registers the notebook display functions with
``traceinsight.analysis.core.display`` (``Result._repr_html_`` and friends use them).
"""

from __future__ import annotations

from traceinsight.render import notebook as _notebook

_notebook.register()
