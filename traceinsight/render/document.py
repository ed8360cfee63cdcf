"""What every output is: a :class:`Document`, one protocol for every kind the commands write.

A document says what it is (``kind``), what it was made from (``inputs``: the trace, the two
runs of a diff, the ranks of a job), the command options that shaped it (``options``), the
sections it holds (``sections``, and their JSON under those names: ``body``), and how it is
shown: its terminal view (``terminal``, ``width`` columns when written to a file), its
Markdown and its HTML. Which formats a kind can be written in is the format registry's word
(``render/outputs/registry.py``: each format lists the kinds it writes); a format asks the
document, never its type. The one JSON envelope (``render/envelope.py``) is the header built
from these plus ``body()``.

The single-purpose commands' documents (``render/documents.py``) are documents themselves;
the analysis layer's results (a report, a diff, a job, a series, a snapshot) cannot know about
rendering, so ``render/report_documents.py`` wraps each in its document (``as_document``).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from rich.console import RenderableType

from traceinsight.render.outputs.base import RenderOptions

Kind = Literal["report", "diff", "gaps", "bound", "compile", "whatif", "sql", "job", "series", "memory_snapshot"]
Inputs = dict[str, str | list[str]]


@runtime_checkable
class Document(Protocol):
    """One output of a command, in any format."""

    @property
    def kind(self) -> Kind: ...

    @property
    def width(self) -> int | None:
        """Columns of its terminal text written to a file or a string (None: $COLUMNS or 80)."""
        ...

    def inputs(self) -> Inputs: ...

    def options(self) -> dict[str, Any]: ...

    def sections(self) -> list[str]: ...

    def body(self) -> dict[str, Any]:
        """The JSON after the envelope's header: the sections by name (and what a kind adds)."""
        ...

    def terminal(self, narrow: bool) -> RenderableType: ...

    def markdown(self, options: RenderOptions) -> str:
        """Its Markdown (only kinds the Markdown format lists are asked)."""
        ...

    def html(self, options: RenderOptions) -> str:
        """Its HTML page (only kinds the HTML format lists are asked); ``options.trace`` is the
        trace for a report's plots when the report's own weak reference is gone."""
        ...

    def fragment(self) -> str | None:
        """Its HTML for a notebook cell (None: a result shown by its section's view)."""
        ...
