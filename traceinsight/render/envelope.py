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
from typing import Any

from traceinsight.render.document import Document, Kind
from traceinsight.render.report_documents import as_document
from traceinsight.version import __version__

__all__ = ["ENVELOPE_SCHEMA_VERSION", "Document", "Kind", "document", "dumps"]

ENVELOPE_SCHEMA_VERSION = 2


def document(obj: Any) -> dict[str, Any]:
    """``obj`` (a document, or an analysis result it wraps) as the JSON-safe envelope (see the
    module docstring): the header from the document's kind, inputs, options and sections, then
    its body."""
    doc = as_document(obj)
    data: dict[str, Any] = {
        "schema_version": ENVELOPE_SCHEMA_VERSION,
        "traceinsight_version": __version__,
        "kind": doc.kind,
        "inputs": doc.inputs(),
        "options": doc.options(),
        "sections": doc.sections(),
    }
    data.update(doc.body())
    return data


def dumps(obj: Any) -> str:
    """The envelope as indented JSON text ending in a newline; NaN/inf never get through."""
    return json.dumps(document(obj), indent=2, allow_nan=False) + "\n"
