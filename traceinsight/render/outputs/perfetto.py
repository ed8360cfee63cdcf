"""Perfetto: a job's ranks as one binary ``.pftrace``, one process per rank on a common clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceinsight.render.outputs.base import RenderOptions


@dataclass(frozen=True)
class PerfettoFormat:
    name: str = "perfetto"
    suffixes: tuple[str, ...] = (".pftrace",)
    binary: bool = True
    kinds: tuple[str, ...] = ("job",)
    label: str = "perfetto (a job's ranks on one timeline)"

    def render(self, document: Any, options: RenderOptions) -> bytes:
        from traceinsight.render.job.perfetto import export_job_perfetto
        from traceinsight.render.report_documents import JobDocument

        if not isinstance(document, JobDocument):  # the kinds above: a job only
            raise TypeError(f"perfetto writes a job's ranks, not a {type(document).__name__}")
        return export_job_perfetto(document.job)


FORMAT = PerfettoFormat()
