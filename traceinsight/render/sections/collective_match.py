"""The ``collective_match`` job section's view: its tables (``render/job/matched.py``)."""

from __future__ import annotations

from traceinsight.analysis.job.collective_match import CollectiveMatchResult
from traceinsight.render import views
from traceinsight.render.job.matched import matched_tables
from traceinsight.render.views import Table

views.register(CollectiveMatchResult, tables=lambda result: [Table(*parts) for parts in matched_tables(result)])
