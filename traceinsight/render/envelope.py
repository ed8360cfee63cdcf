"""The one JSON document every command's ``--format json`` writes.

Every document starts with the same header, then carries its results under their section
names (listed in ``sections``)::

    {
      "schema_version": 2,              # layout of this envelope
      "traceinsight_version": "0.1.0",
      "kind": "report",                 # report | diff | gaps | bound | compile | whatif | sql | job | series | memory_snapshot
      "inputs": {"trace": "run.json.gz"},        # diff: {"before": ..., "after": ...}
      "options": {"only": null, "skip": null},  # command options that shaped the output (bound: by, ...)
      "sections": ["overview", "gaps"], # the keys below holding results
      "overview": {...}, "gaps": {...}  # each result's to_dict(), with its own schema_version
    }

A report also has ``result_schema_version``, ``config`` and ``headline`` after ``sections``.
A report, a job and a series record the section names given to ``--only`` / ``--skip`` in
``options`` (comma-separated lists split; null when not given); ``sections`` lists the
sections shown.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from traceinsight.analysis.core.base import jsonable
from traceinsight.analysis.diff.compare import DiffResult
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.series import SeriesResult
from traceinsight.analysis.report import Report
from traceinsight.analysis.snapshot.report import SnapshotReport
from traceinsight.render.documents import (
    BoundListing,
    CompileReport,
    GapsListing,
    QueryRows,
    WhatIfReport,
)
from traceinsight.version import __version__

ENVELOPE_SCHEMA_VERSION = 2

Kind = Literal["report", "diff", "gaps", "bound", "compile", "whatif", "sql", "job", "series", "memory_snapshot"]
Document = (
    Report | DiffResult | GapsListing | BoundListing | CompileReport | WhatIfReport | QueryRows | JobReport | SeriesResult | SnapshotReport
)

# Keys of Report.to_dict() that the envelope header replaces.
_REPORT_HEADER_KEYS = ("schema_version", "traceinsight_version", "trace", "sections")


def _header(kind: Kind, inputs: dict[str, str | list[str]], options: dict[str, Any], sections: list[str]) -> dict[str, Any]:
    return {
        "schema_version": ENVELOPE_SCHEMA_VERSION,
        "traceinsight_version": __version__,
        "kind": kind,
        "inputs": inputs,
        "options": options,
        "sections": sections,
    }


def _chosen(obj: Report | JobReport | SeriesResult) -> dict[str, Any]:
    """The ``--only`` / ``--skip`` names as given (null when not given)."""
    return {"only": jsonable(obj.only), "skip": jsonable(obj.skip)}


def _report(obj: Report) -> dict[str, Any]:
    body = obj.to_dict()
    data = _header("report", {"trace": obj.trace_path}, _chosen(obj), list(obj.sections))
    data.update((k, v) for k, v in body.items() if k not in _REPORT_HEADER_KEYS)
    return data


def _job(obj: JobReport) -> dict[str, Any]:
    # inputs: the rank files in rank order; failed ranks are listed under "failed", and
    # "findings" (job_findings' findings) is there when job_findings is shown.
    job = obj.to_dict()
    data = _header("job", {"ranks": list(obj.paths)}, _chosen(obj), list(job))
    data.update(job)
    return jsonable(data)  # type: ignore[no-any-return]


def _series(obj: SeriesResult) -> dict[str, Any]:
    runs = [str(p) for p in obj.runs["path"].to_list()]
    data = _header("series", {"runs": runs}, _chosen(obj), ["series"])
    data["series"] = obj.to_dict()
    return jsonable(data)  # type: ignore[no-any-return]


def _diff(obj: DiffResult) -> dict[str, Any]:
    data = _header("diff", {"before": obj.before_path, "after": obj.after_path}, {}, ["diff"])
    data["diff"] = obj.to_dict()
    return jsonable(data)  # type: ignore[no-any-return]


def _gaps(obj: GapsListing) -> dict[str, Any]:
    payload = obj.result.to_dict()
    payload["gaps"] = jsonable(obj.listed)
    data = _header("gaps", {"trace": obj.trace_path}, {"limit": obj.limit}, ["gaps"])
    data["gaps"] = payload
    return data


def _bound(obj: BoundListing) -> dict[str, Any]:
    data = _header("bound", {"trace": obj.trace_path}, {"by": obj.by}, ["bound"])
    data["bound"] = obj.result.to_dict()
    return data


def _compile(obj: CompileReport) -> dict[str, Any]:
    data = _header("compile", {"trace": obj.trace_path}, {}, ["compile"])
    data["compile"] = obj.result.to_dict()
    return data


def _whatif(obj: WhatIfReport) -> dict[str, Any]:
    changes = [str(t.get("description", "")) for t in obj.result.transformations]
    data = _header("whatif", {"trace": obj.trace_path}, {"changes": changes}, ["whatif"])
    data["whatif"] = obj.result.to_dict()
    return data


def _rows(obj: QueryRows) -> dict[str, Any]:
    data = _header("sql", {"trace": obj.trace_path}, {"query": obj.query, "engine": obj.engine}, ["rows"])
    data["rows"] = jsonable(obj.rows)
    return data


def _snapshot(obj: SnapshotReport) -> dict[str, Any]:
    inputs: dict[str, str | list[str]] = {"snapshot": obj.path}
    if obj.compare is not None:
        inputs["compare"] = obj.compare.after_path
    data = _header("memory_snapshot", inputs, {"device": obj.device}, ["memory_snapshot"])
    data["memory_snapshot"] = obj.to_dict()
    return data


# The envelope of each kind of document, by its type.
_DOCUMENTS: dict[type, Callable[[Any], dict[str, Any]]] = {
    Report: _report,
    JobReport: _job,
    SeriesResult: _series,
    DiffResult: _diff,
    GapsListing: _gaps,
    BoundListing: _bound,
    CompileReport: _compile,
    WhatIfReport: _whatif,
    QueryRows: _rows,
    SnapshotReport: _snapshot,
}


def document(obj: Document) -> dict[str, Any]:
    """``obj`` as the JSON-safe envelope (see the module docstring)."""
    for cls in type(obj).__mro__:
        build = _DOCUMENTS.get(cls)
        if build is not None:
            return build(obj)
    raise TypeError(f"not a document traceinsight writes: {type(obj).__name__}")


def dumps(obj: Document) -> str:
    """The envelope as indented JSON text ending in a newline; NaN/inf never get through."""
    return json.dumps(document(obj), indent=2, allow_nan=False) + "\n"
