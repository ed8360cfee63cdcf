"""The ``stragglers`` job section's view: the straggler's own time per step."""

from __future__ import annotations

from traceinsight.analysis.job.stragglers import StragglerResult
from traceinsight.render import views
from traceinsight.render.job.view import straggler_table

views.register(StragglerResult, tables=lambda result: [straggler_table(result)])
