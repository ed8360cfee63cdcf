"""The ``collective_wait`` job section's view: each rank's wait in collectives."""

from __future__ import annotations

from traceinsight.analysis.job.collectives import CollectiveWaitResult
from traceinsight.render import views
from traceinsight.render.job.view import wait_table

views.register(CollectiveWaitResult, tables=lambda result: [wait_table(result)])
