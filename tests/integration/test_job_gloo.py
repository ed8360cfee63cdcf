"""The four-rank gloo job recorded on one H200 (sample_traces/README.md): rank 2 sleeps 30 ms
more per step inside its ``data_loading`` input step in ``job_straggler``; ``job_balanced`` has
every rank alike. gloo leaves its all-reduces as host spans (``gloo:all_reduce``), so the rank
table measures communication there (``comm_measured_on == "host"``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import traceinsight as ti
from traceinsight.analysis.core.base import AnalysisConfig, Inputs
from traceinsight.analysis.job.report import JobReport
from traceinsight.analysis.job.specs import CATALOG, JOB_ANALYSES, run_job_closure
from traceinsight.analysis.registry import ANALYSES
from traceinsight.analysis.runner import run_closure

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
STRAGGLER = str(SAMPLES / "job_straggler.rank*.json.gz")
BALANCED = str(SAMPLES / "job_balanced.rank*.json.gz")


@pytest.fixture(scope="module")
def straggler() -> Any:
    return ti.load_job(STRAGGLER, engine="serial")


@pytest.fixture(scope="module")
def balanced() -> Any:
    return ti.load_job(BALANCED, engine="serial")


def test_the_straggler_is_rank_2_for_data_loading(straggler: Any) -> None:
    report = ti.analyze(straggler)
    assert isinstance(report, JobReport)
    assert straggler.ranks == [0, 1, 2, 3] and straggler.world_size == 4
    s = report.stragglers
    assert s.material and s.straggler == 2 and s.reason == "data_loading"
    assert s.steps_led == len(s.steps_used) == 8
    top = s.excess_parts.row(0, named=True)
    assert top["part"] == "dataloader" and 28e6 < top["excess_ns"] < 32e6  # the extra 30 ms sleep
    finding = report.findings[0]
    assert finding.id == "rank_straggler" and finding.evidence.rank == 2
    assert "loading data" in finding.title and "DataLoader" in finding.fix


def test_the_others_wait_for_rank_2_in_their_all_reduce(straggler: Any) -> None:
    wait = ti.analyze(straggler).collective_wait
    assert wait.available and wait.matched_by == "order within the process group"
    per_rank = {r["rank"]: r for r in wait.per_rank.to_dicts()}
    assert per_rank[2]["wait_ns"] == 0 and per_rank[2]["last_arrivals"] == 8
    for rank in (0, 1, 3):
        assert 8 * 28e6 < per_rank[rank]["wait_ns"] < 8 * 32e6


def test_the_balanced_job_has_no_material_straggler(balanced: Any) -> None:
    report = ti.analyze(balanced)
    assert not report.stragglers.material and report.stragglers.straggler is None
    assert "rank_straggler" not in [f.id for f in report.findings]


def test_compare_says_the_balanced_job_is_faster() -> None:
    result = ti.compare([STRAGGLER, BALANCED], engine="serial")
    runs = result.runs.to_dicts()
    assert [r["ranks"] for r in runs] == [4, 4]
    assert runs[1]["verdict"] == "faster" and runs[1]["ratio"] < 0.5
    assert result.fastest == 1
    assert any("Rank 2" in t for t in runs[0]["top_findings"])


def test_job_specs_have_their_own_registry_with_names_apart() -> None:
    names = [s.name for s in JOB_ANALYSES]
    assert names == ["rank_table", "stragglers", "collective_wait", "collective_match", "job_findings", "series"]
    assert all(s.kind == "job" for s in JOB_ANALYSES) and all(s.kind == "trace" for s in ANALYSES)
    assert not {s.name for s in JOB_ANALYSES} & {s.name for s in ANALYSES}
    assert CATALOG.get("job_findings").requires == ("rank_table", "stragglers", "collective_wait", "collective_match")


def test_the_single_trace_runner_refuses_job_specs(straggler: Any) -> None:
    trace = ti.load(straggler.spec.paths[0])
    with pytest.raises(ValueError, match="'stragglers' is no single-trace analysis"):
        run_closure(trace, AnalysisConfig(), ["steps", "stragglers"])


def test_the_job_runner_runs_requirements_once(straggler: Any) -> None:
    results = run_job_closure(straggler, AnalysisConfig(), ["job_findings"])
    assert list(results) == ["rank_table", "stragglers", "collective_wait", "collective_match", "job_findings"]
    with pytest.raises(ValueError, match="over one trace"):
        run_job_closure(straggler, AnalysisConfig(), ["gaps"])
    assert Inputs(results).get("job_findings", type(results["job_findings"])).findings


def test_job_sql_has_a_rank_column(straggler: Any) -> None:
    rows = straggler.sql(
        "SELECT rank, SUM(dur_ns) AS ns FROM events WHERE name = 'data_loading' AND kind = 'user_annotation' "
        "GROUP BY rank ORDER BY rank"
    )
    ns = dict(zip(rows["rank"].to_list(), rows["ns"].to_list(), strict=True))
    assert ns[2] > 10 * ns[0]  # 32 ms against 2 ms per step


# --- communication measured on the host (gloo has no collective kernels) ----------------------


def _rank_rows(report: JobReport) -> dict[int, dict[str, Any]]:
    return {int(r["rank"]): r for r in report.rank_table.table.to_dicts()}


@pytest.mark.parametrize("job", ["straggler", "balanced"])
def test_gloo_communication_is_measured_on_the_host(job: str, request: pytest.FixtureRequest) -> None:
    report = ti.analyze(request.getfixturevalue(job))
    steps = len(report.rank_table.steps_used)
    # The collective wait section's host spans, per rank, over the same steps.
    by_step = report.collective_wait.wait_by_step.filter(pl.col("step").is_in(list(report.rank_table.steps_used)))
    spans = dict(by_step.group_by("rank").agg(pl.col("collective_ns").sum()).iter_rows())
    for rank, row in _rank_rows(report).items():
        assert row["comm_measured_on"] == "host"
        # Physically possible: the GPU idles for part of the span, the span fits in the step.
        assert 0 < row["exposed_comm_ns"] <= row["communication_ns"] <= row["step_mean_ns"]
        assert row["collective_wait_ns"] <= row["communication_ns"]
        assert row["exposed_comm_ns"] <= row["idle_ns"] + 0.01 * row["step_mean_ns"]
        # The same time as the collective wait section's spans of those steps.
        assert row["communication_ns"] * steps == pytest.approx(spans[rank], rel=1e-9)


def test_gloo_straggler_communication_figures(straggler: Any) -> None:
    rows = _rank_rows(ti.analyze(straggler))
    # Rank 2 arrives last: its all-reduce is the transfer alone (~8.7 ms per step); the others
    # add ~30 ms of waiting for it, and the GPU idles through nearly all of it.
    assert 7e6 < rows[2]["communication_ns"] < 10e6
    for rank in (0, 1, 3):
        comm = rows[rank]["communication_ns"]
        assert 36e6 < comm < 42e6 and rows[rank]["exposed_comm_ns"] > 0.97 * comm
        transfer = comm - rows[rank]["collective_wait_ns"]
        assert transfer == pytest.approx(rows[2]["communication_ns"], abs=1.5e6)


def test_gloo_exposed_communication_names_the_host_backend(balanced: Any) -> None:
    report = ti.analyze(balanced)
    found = {f.id: f for f in report.findings}
    exposed = found["exposed_communication"]
    assert "nccl" in exposed.fix and "host-side" in exposed.method
    assert exposed.saving_ns < report.job_findings.step_ns
    from traceinsight.render.formats import render

    text = render(report, "terminal")
    assert "host-side collective spans" in text
    data = json.loads(render(report, "json"))
    assert {r["comm_measured_on"] for r in data["rank_table"]["table"]} == {"host"}
