"""The documents of the analysis layer's results: a report, a diff, a job, a series of runs and
an allocator snapshot. The results know nothing about rendering; each is wrapped here in a
:class:`~traceinsight.render.document.Document` that says how it is shown.

``DOCUMENTS`` is the one place that maps an analysis type to its document; every format, the
JSON envelope and the notebook go through it (:func:`as_document`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from rich.console import RenderableType

from traceinsight.analysis.core.base import jsonable
from traceinsight.analysis.diff.compare import DiffResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.document import Document, Kind
from traceinsight.render.outputs.base import RenderOptions
from traceinsight.render.terminal import NARROW, text_console

# Keys of Report.to_dict() that the envelope header replaces.
_REPORT_HEADER_KEYS = ("schema_version", "traceinsight_version", "trace", "sections")


def _chosen(obj: Report | JobReport | SeriesResult) -> dict[str, Any]:
    """The ``--only`` / ``--skip`` names as given (null when not given)."""
    return {"only": jsonable(obj.only), "skip": jsonable(obj.skip)}


@dataclass(frozen=True)
class ReportDocument:
    """``analyze`` of one trace; its HTML plots read the trace the report still refers to."""

    report: Report
    kind: ClassVar[Literal["report"]] = "report"
    width: ClassVar[int] = 100

    def inputs(self) -> dict[str, str | list[str]]:
        return {"trace": self.report.trace_path}

    def options(self) -> dict[str, Any]:
        return _chosen(self.report)

    def sections(self) -> list[str]:
        return list(self.report.sections)

    def body(self) -> dict[str, Any]:
        return {k: v for k, v in self.report.to_dict().items() if k not in _REPORT_HEADER_KEYS}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.terminal import report_renderable

        return report_renderable(self.report, narrow=narrow)

    def markdown(self, options: RenderOptions) -> str:
        from traceinsight.render.report_markdown import render_markdown

        return render_markdown(self.report)

    def html(self, options: RenderOptions) -> str:
        from traceinsight.render.html.report import render_html

        return render_html(self.report, options.trace or self.report.trace)

    def fragment(self) -> str | None:
        from traceinsight.render.fragments import report_html

        return report_html(self.report)


@dataclass(frozen=True)
class DiffDocument:
    """``diff`` of two runs."""

    diff: DiffResult
    kind: ClassVar[Literal["diff"]] = "diff"
    width: ClassVar[int] = 140

    def inputs(self) -> dict[str, str | list[str]]:
        return {"before": self.diff.before_path, "after": self.diff.after_path}

    def options(self) -> dict[str, Any]:
        return {}

    def sections(self) -> list[str]:
        return ["diff"]

    def body(self) -> dict[str, Any]:
        return {"diff": jsonable(self.diff.to_dict())}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.diff.terminal import render_terminal

        return render_terminal(self.diff)

    def markdown(self, options: RenderOptions) -> str:
        from traceinsight.render.diff.markdown import render_markdown

        return render_markdown(self.diff, top=options.top)

    def html(self, options: RenderOptions) -> str:
        from traceinsight.render.diff.html import render_diff_html

        return render_diff_html(self.diff)

    def fragment(self) -> str | None:
        return None


@dataclass(frozen=True)
class JobDocument:
    """``analyze`` of the ranks of a job: its rank files in rank order are its inputs; failed
    ranks are listed under ``failed``, and ``findings`` is there when job_findings is shown."""

    job: JobReport
    kind: ClassVar[Literal["job"]] = "job"
    width: ClassVar[int] = 100

    def inputs(self) -> dict[str, str | list[str]]:
        return {"ranks": list(self.job.paths)}

    def options(self) -> dict[str, Any]:
        return _chosen(self.job)

    def sections(self) -> list[str]:
        return list(self.job.to_dict())

    def body(self) -> dict[str, Any]:
        return jsonable(self.job.to_dict())  # type: ignore[no-any-return]

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.job.terminal import job_renderable

        return job_renderable(self.job)

    def markdown(self, options: RenderOptions) -> str:
        from traceinsight.render.job.markdown import job_markdown

        return job_markdown(self.job)

    def html(self, options: RenderOptions) -> str:
        from traceinsight.render.job.html import render_job_html

        return render_job_html(self.job)

    def fragment(self) -> str | None:
        from traceinsight.render.fragments import job_html

        return job_html(self.job)


@dataclass(frozen=True)
class SeriesDocument:
    """``compare`` of a series of runs, each against the first."""

    series: SeriesResult
    kind: ClassVar[Literal["series"]] = "series"
    width: ClassVar[int] = 120

    def inputs(self) -> dict[str, str | list[str]]:
        return {"runs": [str(p) for p in self.series.runs["path"].to_list()]}

    def options(self) -> dict[str, Any]:
        return _chosen(self.series)

    def sections(self) -> list[str]:
        return ["series"]

    def body(self) -> dict[str, Any]:
        return {"series": jsonable(self.series.to_dict())}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.job.terminal import series_renderable

        return series_renderable(self.series)

    def markdown(self, options: RenderOptions) -> str:
        from traceinsight.render.job.markdown import series_markdown

        return series_markdown(self.series)

    def html(self, options: RenderOptions) -> str:
        from traceinsight.render.job.html import render_series_html

        return render_series_html(self.series)

    def fragment(self) -> str | None:
        from traceinsight.render.fragments import series_html

        return series_html(self.series)


@dataclass(frozen=True)
class SnapshotDocument:
    """``memory`` of an allocator snapshot (and the one it is compared with)."""

    snapshot: SnapshotReport
    kind: ClassVar[Literal["memory_snapshot"]] = "memory_snapshot"
    width: ClassVar[int] = 120

    def inputs(self) -> dict[str, str | list[str]]:
        inputs: dict[str, str | list[str]] = {"snapshot": self.snapshot.path}
        if self.snapshot.compare is not None:
            inputs["compare"] = self.snapshot.compare.after_path
        return inputs

    def options(self) -> dict[str, Any]:
        return {"device": self.snapshot.device}

    def sections(self) -> list[str]:
        return ["memory_snapshot"]

    def body(self) -> dict[str, Any]:
        return {"memory_snapshot": self.snapshot.to_dict()}

    def terminal(self, narrow: bool) -> RenderableType:
        from traceinsight.render.snapshot.terminal import render_terminal

        return render_terminal(self.snapshot)

    def markdown(self, options: RenderOptions) -> str:
        from traceinsight.render.snapshot.markdown import render_markdown

        return render_markdown(self.snapshot, top=max(options.top, 10))

    def html(self, options: RenderOptions) -> str:
        from traceinsight.render.snapshot.html import render_html

        return render_html(self.snapshot)

    def fragment(self) -> str | None:
        return None


# Each analysis type's document, the one table from a result to how it is shown.
DOCUMENTS: dict[type, Any] = {
    Report: ReportDocument,
    DiffResult: DiffDocument,
    JobReport: JobDocument,
    SeriesResult: SeriesDocument,
    SnapshotReport: SnapshotDocument,
}


def wrap(obj: Any) -> Document | None:
    """``obj``'s document, or None when it is no analysis type traceinsight writes."""
    for cls in type(obj).__mro__:
        make = DOCUMENTS.get(cls)
        if make is not None:
            document: Document = make(obj)
            return document
    return None


def as_document(obj: Any) -> Document:
    """``obj`` as a document: itself when it is one, else the document of its analysis type."""
    if isinstance(obj, Document):
        return obj
    found = wrap(obj)
    if found is None:
        raise TypeError(f"not a document traceinsight writes: {type(obj).__name__}")
    return found


def kind_of(obj: Any) -> Kind:
    return as_document(obj).kind


def renderable(obj: Any, *, narrow: bool = False) -> RenderableType:
    """``obj`` as a rich renderable for the terminal."""
    return as_document(obj).terminal(narrow)


def terminal_text(obj: Any, *, width: int | None = None) -> str:
    """The terminal view as plain text, ``width`` columns wide (the kind's own without one)."""
    doc = as_document(obj)
    width = width or doc.width
    buf = io.StringIO()
    console = text_console(buf, width)
    console.print(doc.terminal(console.width < NARROW))
    return buf.getvalue()
