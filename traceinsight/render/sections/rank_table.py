"""The ``rank_table`` job section's view: the per-rank table (``render/job/view.py``)."""

from __future__ import annotations

from traceinsight.analysis.job.ranks import RankTableResult
from traceinsight.render import views
from traceinsight.render.job.view import rank_table

views.register(RankTableResult, tables=lambda result: [rank_table(result)])
