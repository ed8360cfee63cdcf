"""Jobs of several ranks: discovery, the per-rank summary and the cross-rank analyses.

The DDP pair is a real recording (two H200s, NCCL). The small multi-rank traces built here are
hand-made (``make_rank``): each step, a rank loads data for ``delay_us``, computes, then
all-reduces; the all-reduce ends at the same moment on every rank, as a real one does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from handmade import kernel, launch, op, write_trace

from traceinsight.analysis.job import collectives, ranks, series, stragglers
from traceinsight.analysis.job.report import analyze_job
from traceinsight.engine.job import load_job, load_series
from traceinsight.trace.discover import (
    JobDiscoveryError,
    distributed_info,
    rank_from_name,
)
from traceinsight.trace.layout import discover

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
DDP = sorted(str(p) for p in SAMPLES.glob("ddp_train.rank*.json.gz"))
STEP_US = 1000.0


def make_rank(
    path: Path, rank: int, world: int, *, delay_us: float = 0.0, steps: int = 4, info: bool = True, gz: bool = False
) -> Path:
    """Hand-made rank trace: per step, DataLoader (delay_us), a compute kernel, an all-reduce."""
    events: list[dict[str, Any]] = []
    corr = 1
    for k in range(steps):
        s = 100.0 + k * STEP_US
        events.append(op(f"ProfilerStep#{k}", s, STEP_US - 1, cat="user_annotation"))
        if delay_us:
            events.append(op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 1, delay_us))
        t = s + 2 + delay_us
        events.append(op("aten::mm", t, 20))
        events.append(launch("cudaLaunchKernel", t + 5, 5, corr))
        events.append(kernel("gemm_kernel", t + 12, 300, corr))
        corr += 1
        events.append(op("record_param_comms", t + 30, 10))
        events.append(launch("cudaLaunchKernel", t + 32, 5, corr))
        comm_start = t + 40
        events.append(
            kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                comm_start,
                s + 900 - comm_start,
                corr,
                stream=20,
                extra={"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
                       "Group size": world, "dtype": "Float", "Process Group Name": "0"},
            )
        )
        corr += 1
    header: dict[str, Any] = {"baseTimeNanoseconds": 1_700_000_000_000_000_000}
    if info:
        header["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    return write_trace(path, events, gz=gz, **header)


@pytest.fixture()
def straggler_job(tmp_path: Path) -> list[str]:
    return [str(make_rank(tmp_path / f"toy.rank{r}.json", r, 4, delay_us=300.0 if r == 2 else 0.0)) for r in range(4)]


# --- discovery -----------------------------------------------------------------------------


def test_discover_reads_rank_from_distributed_info(tmp_path: Path) -> None:
    # Names say nothing about the rank; the header does.
    for r in range(2):
        make_rank(tmp_path / f"host_{r}.pt.trace.json.gz", r, 2, gz=True)
    spec = discover(tmp_path)
    assert [f.rank for f in spec.ranks] == [0, 1]
    assert {f.rank_from for f in spec.ranks} == {"distributedInfo"}
    assert spec.world_size == 2 and spec.backend == "nccl"


def test_discover_ddp_pair_head_only() -> None:
    spec = discover(DDP)
    assert [(f.rank, f.world_size) for f in spec.ranks] == [(0, 2), (1, 2)]


def test_rank_from_file_names(tmp_path: Path) -> None:
    assert rank_from_name("job.rank3.json.gz") == (3, "job")
    assert rank_from_name("rank-3.json.gz")[0] == 3  # type: ignore[index]
    assert rank_from_name("worker3.12345.pt.trace.json.gz")[0] == 3  # type: ignore[index]
    for r in range(3):
        make_rank(tmp_path / f"rank-{r}.json", r, 3, info=False)
    spec = discover(str(tmp_path / "rank-*.json"))
    assert [f.rank for f in spec.ranks] == [0, 1, 2]
    assert {f.rank_from for f in spec.ranks} == {"file name"}


def test_mixed_jobs_are_refused(tmp_path: Path) -> None:
    make_rank(tmp_path / "a.rank0.json", 0, 2)
    make_rank(tmp_path / "a.rank1.json", 1, 2)
    make_rank(tmp_path / "b.rank0.json", 0, 4)
    with pytest.raises(JobDiscoveryError, match="different jobs") as info:
        discover(tmp_path)
    assert "b.rank0.json" in str(info.value) and "\n" not in str(info.value)


def test_mixed_names_are_refused(tmp_path: Path) -> None:
    make_rank(tmp_path / "a.rank0.json", 0, 2, info=False)
    make_rank(tmp_path / "b.rank1.json", 1, 2, info=False)
    with pytest.raises(JobDiscoveryError, match="different jobs"):
        discover(tmp_path)


def test_duplicate_rank_is_refused(tmp_path: Path) -> None:
    make_rank(tmp_path / "x.rank0.json", 0, 2)
    make_rank(tmp_path / "x.rank1.json", 0, 2)  # says rank 0 inside
    with pytest.raises(JobDiscoveryError, match="rank 0 appears twice") as info:
        discover(tmp_path)
    assert "x.rank1.json" in str(info.value)


def test_missing_ranks(tmp_path: Path) -> None:
    make_rank(tmp_path / "x.rank0.json", 0, 4)
    make_rank(tmp_path / "x.rank2.json", 2, 4)
    with pytest.raises(JobDiscoveryError, match=r"rank\(s\) 1, 3 of world size 4 missing"):
        discover(tmp_path)
    spec = discover(tmp_path, allow_missing=True)
    assert [f.rank for f in spec.ranks] == [0, 2] and spec.warnings


def test_one_trace_without_a_rank_is_a_job_of_one(tmp_path: Path) -> None:
    make_rank(tmp_path / "trace.json", 0, 1, info=False)
    spec = discover(tmp_path)
    assert [(f.rank, f.rank_from) for f in spec.ranks] == [(0, "only trace")] and spec.world_size == 1


def test_distributed_info_from_head_only() -> None:
    head = b'{"a": {"b": "}"}, "distributedInfo": {"rank": 5, "world_size": 8, "x": "a\\"}"}, "traceEvents": ['
    assert distributed_info(head) == {"rank": 5, "world_size": 8, "x": 'a"}'}
    assert distributed_info(b'{"distributedInfo": {"rank": 5, "wor') is None


# --- the DDP pair (real) -----------------------------------------------------------------


@pytest.fixture(scope="module")
def ddp_job() -> Any:
    return load_job(DDP, engine="serial")


def test_ddp_straggler_is_rank1_for_host_reasons(ddp_job: Any) -> None:
    result = stragglers.analyze(ddp_job.summaries)
    assert result.material and result.straggler == 1
    assert result.reason == "host"
    assert result.steps_led == len(result.steps_used) == 5  # step 3 is rank 0's warm-up
    assert result.lost_share > 0.2


def test_ddp_rank0_waits_its_extra_allreduce_time(ddp_job: Any) -> None:
    wait = collectives.analyze(ddp_job.summaries)
    assert wait.matched_by == "order within the process group"
    per_rank = {r["rank"]: r for r in wait.per_rank.to_dicts()}
    assert per_rank[0]["collectives"] == per_rank[1]["collectives"] == 42
    extra = per_rank[0]["collective_ns"] - per_rank[1]["collective_ns"]
    # Rank 0's wait is its extra all-reduce time (up to rank 1's own few short waits).
    assert per_rank[0]["wait_ns"] == pytest.approx(extra, rel=0.03)
    assert per_rank[1]["wait_ns"] < 0.01 * per_rank[0]["wait_ns"]
    assert per_rank[1]["last_arrivals"] >= 40
    by_kind = wait.by_kind.row(0, named=True)
    assert by_kind["collective"] == "allreduce"
    assert 100 < by_kind["busbw_median_gbps"] < 450  # NVLink on H200: 450 GB/s per direction


def test_ddp_rank_table(ddp_job: Any) -> None:
    table = ranks.analyze(ddp_job.summaries)
    r0, r1 = table.row(0), table.row(1)
    # rank 0 spends several ms per step in all-reduce against rank 1's ~1.5 ms
    assert r0["communication_ns"] > 2.5 * r1["communication_ns"]
    assert 1.2e6 < r1["communication_ns"] < 1.9e6
    assert r0["collective_wait_ns"] > 2e6 > r1["collective_wait_ns"]
    assert r0["exposed_comm_ns"] <= r0["communication_ns"]
    assert r1["idle_launch_overhead_ns"] > 5 * r0["idle_launch_overhead_ns"]
    assert r0["comm_measured_on"] == r1["comm_measured_on"] == "device"  # NCCL kernels


def test_ddp_findings_and_json(ddp_job: Any) -> None:
    report = ddp_job.analyze()
    ids = [f.id for f in report.findings]
    # rank 1's lost time, from its own steps (rank_straggler) and from its late arrivals at the
    # matched collectives (late_arrival): two measurements of one cost, both first
    assert set(ids[:2]) == {"rank_straggler", "late_arrival"}
    assert report.findings[0].evidence.rank == report.findings[1].evidence.rank == 1
    assert abs(report.findings[0].saving_ns - report.findings[1].saving_ns) < 0.05 * report.findings[0].saving_ns
    assert "collective_wait" in ids
    assert [f.saving_ns for f in report.findings] == sorted((f.saving_ns for f in report.findings), reverse=True)
    text = json.dumps(report.to_dict(), allow_nan=False)
    assert "rank_straggler" in text


def test_straggler_share_in_the_headline_is_the_findings_saving(ddp_job: Any) -> None:
    # the headline ("the others lose N % of the step time") and the finding print one figure
    report = ddp_job.analyze()
    finding = next(f for f in report.findings if f.id == "rank_straggler")
    assert round(100 * report.stragglers.lost_share, 1) == round(finding.saving_pct, 1)


def test_job_frames_are_lazy_with_a_rank_column(ddp_job: Any) -> None:
    lazy = ddp_job.scan("kernels")
    assert isinstance(lazy, pl.LazyFrame)
    counts = ddp_job.sql(
        "SELECT rank, COUNT(*) AS n FROM kernels WHERE name LIKE '%AllReduce%' GROUP BY rank ORDER BY rank"
    )
    assert counts["rank"].to_list() == [0, 1]
    assert counts["n"].to_list() == [48, 42]  # rank 0 also has 6 launched before its trace began


# --- hand-made jobs: straggler, failures --------------------------------------------------


def test_handmade_straggler_is_named_with_data_loading(straggler_job: list[str]) -> None:
    job = load_job(straggler_job, engine="serial")
    report = analyze_job(job.summaries)
    assert report.stragglers.straggler == 2
    assert report.stragglers.reason == "data_loading"
    finding = next(f for f in report.findings if f.id == "rank_straggler")
    assert finding.evidence.rank == 2
    # the others wait ~300 µs per all-reduce; rank 2 does not
    waits = {r["rank"]: r["wait_ns"] for r in report.collective_wait.per_rank.to_dicts()}
    assert waits[2] == 0
    assert all(waits[r] == pytest.approx(4 * 300_000, rel=0.01) for r in (0, 1, 3))


def test_handmade_balanced_job_has_no_straggler(tmp_path: Path) -> None:
    files = [str(make_rank(tmp_path / f"even.rank{r}.json", r, 4)) for r in range(4)]
    report = load_job(files, engine="serial").analyze()
    assert not report.stragglers.material and report.stragglers.straggler is None
    assert "rank_straggler" not in [f.id for f in report.findings]


def test_unreadable_rank_does_not_lose_the_others(tmp_path: Path) -> None:
    for r in (0, 1, 3):
        make_rank(tmp_path / f"j.rank{r}.json", r, 4, info=False)
    (tmp_path / "j.rank2.json").write_text('{"traceEvents": [ {"ph": "X", "ts": ')
    job = load_job(tmp_path, jobs=2)
    assert job.ranks == [0, 1, 3]
    assert [f.rank for f in job.failed] == [2]
    assert "j.rank2.json" in job.failed[0].error and "\n" not in job.failed[0].error
    assert job.analyze().rank_table.table.height == 3


def test_local_pool_matches_serial(straggler_job: list[str]) -> None:
    serial = load_job(straggler_job, engine="serial")
    pooled = load_job(straggler_job, engine="local", jobs=2)
    assert serial.ranks == pooled.ranks
    for a, b in zip(serial.summaries, pooled.summaries, strict=True):
        assert a.steps.equals(b.steps) and a.collectives.equals(b.collectives) and a.kernel_mix.equals(b.kernel_mix)
    assert serial.analyze().to_dict() == pooled.analyze().to_dict()


def test_series_against_the_first_run() -> None:
    paths = [SAMPLES / f"mm_sweep_{n}.json.gz" for n in (64, 1024, 4096)]
    result = load_series(paths, engine="serial")
    runs = result.runs
    assert runs["verdict"][0] == "baseline" and runs["ratio"][0] == pytest.approx(1.0)
    assert runs["step_median_ns"][2] > runs["step_median_ns"][0]
    assert runs["ratio"][2] > 1.5
    assert series.SeriesResult().to_polars().height == 0


def _host_collective_trace(path: Path, *, nccl: bool = False) -> Path:
    """Hand-made: one step with two compute kernels (10–200 µs, 400–900 µs) and an all-reduce
    from 150 to 450 µs: a gloo host span on another thread, or (``nccl``) an NCCL kernel."""
    from handmade import HandMadeTrace

    t = HandMadeTrace()
    t.step(1, 0.0, 1000.0)
    t.gpu("gemm_a", 10.0, 190.0)
    t.gpu("gemm_b", 400.0, 500.0)
    if nccl:
        t.gpu("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 150.0, 300.0, stream=20,
              args={"Collective name": "allreduce", "Process Group Name": "0"})
    else:
        t.host("gloo:all_reduce", 150.0, 300.0, cat="user_annotation", tid=7)
    return t.write(path)


def test_handmade_host_collective_counts_its_span_and_the_gpu_idle_part(tmp_path: Path) -> None:
    # GIVEN a hand-made gloo-style step: the host all-reduce overlaps device work for 100 µs
    from traceinsight.analysis.job.summary import summarize
    from traceinsight.trace.loader import load

    summary = summarize(load(_host_collective_trace(tmp_path / "gloo.json"), cache=False), rank=0)
    # THEN communication is its span, exposed the 200 µs with the GPU idle (200–400 µs)
    assert summary.comm_measured_on == "host"
    assert int(summary.steps["communication_ns"].sum()) == 300_000
    assert int(summary.steps["exposed_comm_ns"].sum()) == 200_000
    assert summary.collectives["on_device"].to_list() == [False]


def test_handmade_device_collective_keeps_the_kernel_measure(tmp_path: Path) -> None:
    # GIVEN the same step with an NCCL kernel instead: exposed = with no compute kernel running
    from traceinsight.analysis.job.summary import summarize
    from traceinsight.trace.loader import load

    summary = summarize(load(_host_collective_trace(tmp_path / "nccl.json", nccl=True), cache=False), rank=0)
    assert summary.comm_measured_on == "device"
    assert int(summary.steps["communication_ns"].sum()) == 300_000
    assert int(summary.steps["exposed_comm_ns"].sum()) == 200_000


def test_no_collective_means_no_measure(tmp_path: Path) -> None:
    from handmade import HandMadeTrace

    from traceinsight.analysis.job.summary import summarize
    from traceinsight.trace.loader import load

    t = HandMadeTrace()
    t.step(1, 0.0, 1000.0)
    t.gpu("gemm_a", 10.0, 190.0)
    summary = summarize(load(t.write(tmp_path / "none.json"), cache=False), rank=0)
    assert summary.comm_measured_on is None and int(summary.steps["communication_ns"].sum()) == 0
