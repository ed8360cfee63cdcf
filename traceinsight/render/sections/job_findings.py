"""The ``job_findings`` job section's view: the cross-rank findings, ranked by saving."""

from __future__ import annotations

from traceinsight.analysis.job.findings import JobFindingsResult
from traceinsight.render import views
from traceinsight.render.job.view import findings_table

views.register(JobFindingsResult, tables=lambda result: [findings_table(result)])
