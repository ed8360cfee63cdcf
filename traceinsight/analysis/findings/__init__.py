"""Findings: what to fix first, with the saving each fix would bring.

Reads the other analyses' results (gaps, breakdown, steps, ops, kernels, bound, memory,
compile) through a :class:`FindingContext`, runs one detector per catalogue entry, caps the
savings so that findings sharing the same device time never add up to more than it, and ranks
them. ``SPEC`` and ``run(trace, config, inputs)`` live in :mod:`.spec` (the registry's line).

The rooms, each importing only the ones below it (import-linter checks it):

- :mod:`.verdict`: the ranked result (:mod:`.verdict.rank`) and the plain-words headline;
- :mod:`.detect`: the detectors, their fix texts, and ``DETECTORS``;
- :mod:`.price`: estimates turned into savings: pools and caps, the replayed what-if, the
  program's clock, and the what-if transformations the detectors attach;
- :mod:`.read`: what the detectors read: the :class:`FindingContext` and the evidence helpers
  (steady-state gaps, syncs, the workload, collectives, kernel chains);
- :mod:`.catalogue` and :mod:`.model`: the ids and thresholds, and the result types.
"""

from __future__ import annotations

from traceinsight.analysis.findings.catalogue import CATALOGUE
from traceinsight.analysis.findings.detect import DETECTORS
from traceinsight.analysis.findings.model import (
    Evidence,
    Finding,
    FindingsResult,
    KernelEvidence,
    OpEvidence,
    RegionEvidence,
)
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.findings.verdict.rank import find

__all__ = [
    "CATALOGUE",
    "DETECTORS",
    "Evidence",
    "Finding",
    "FindingContext",
    "FindingsResult",
    "KernelEvidence",
    "OpEvidence",
    "RegionEvidence",
    "find",
]
