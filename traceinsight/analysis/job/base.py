"""What a job analysis is: a ``Spec`` over the job's rank summaries in place of a trace.

In a module of its own so that a job analysis module can declare its ``SPEC`` without
importing the job registry (``specs.py``), which imports it."""

from __future__ import annotations

from collections.abc import Sequence

from traceinsight.analysis.core.base import Spec
from traceinsight.analysis.job.summary import RankSummary

# An analysis over the rank summaries of a job (or the runs of a series).
JobAnalysisSpec = Spec[Sequence[RankSummary]]
