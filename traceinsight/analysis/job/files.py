"""The file writers a job report and a series share: each writes what its command writes."""

from __future__ import annotations

import os

from traceinsight.analysis.core import display
from traceinsight.atomic import write_atomic


class CommandFiles:
    """``to_markdown`` / ``write_html`` / ``write_json``: exactly what the command writes with
    ``--format md/html/json`` (``analyze DIR`` for a job, ``compare`` for a series), through
    the presentation package's display hooks. Files appear whole or not at all."""

    def to_markdown(self) -> str:
        """The Markdown document ``--format md`` writes."""
        return display.render("report_markdown", self)

    def write_html(self, path: str | os.PathLike[str]) -> None:
        """Write the HTML page ``--format html`` writes (a job: heatmap and tables; a series:
        plot and tables)."""
        write_atomic(display.render("report_page", self), path)

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write the JSON document ``--format json`` writes (its envelope)."""
        write_atomic(display.render("report_json", self), path)
