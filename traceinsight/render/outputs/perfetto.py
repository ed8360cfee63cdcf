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

        return export_job_perfetto(document)


FORMAT = PerfettoFormat()
