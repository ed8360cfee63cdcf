"""Collectives matched across ranks (``collective_match``): on every multi-rank trace we have,
and on a hand-made four-rank job (``collective_job``: written by hand, not recorded) with two
kinds of process groups, sequence numbers or none, skewed clocks and a rank whose trace starts
one step late."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from collective_job import DP_TRANSFER_US, write_job

from traceinsight.analysis.job.collective_match import CollectiveMatchResult, analyze
from traceinsight.analysis.job.links import job_link
from traceinsight.analysis.job.matching import KEY, match
from traceinsight.analysis.job.report import analyze_job
from traceinsight.analysis.job.summary import RankSummary
from traceinsight.engine.job import load_job

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
HTA = ROOT.parent / "shared" / "third_party" / "hta"
# What each rank's clock was shifted by in the hand-made job (µs): alignment must undo it.
SKEW_US = (0.0, -700.0, 35.0, 5_000.0)


def _job(tmp_path: Path, **kw: Any) -> list[RankSummary]:
    return list(load_job(write_job(tmp_path, skew_us=SKEW_US, **kw), engine="serial", cache=False).summaries)


def _one_size_and_kind_per_collective(rows: pl.DataFrame) -> None:
    per = rows.group_by(KEY).agg(pl.col("bytes").n_unique().alias("sizes"), pl.col("kind").n_unique().alias("kinds"))
    assert per["sizes"].max() == 1 and per["kinds"].max() == 1


def _offsets_undo_the_skew(result: CollectiveMatchResult) -> None:
    got = dict(result.per_rank.select("rank", "offset_ns").iter_rows())
    for rank, skew in enumerate(SKEW_US):
        # the hand-made ends differ by up to 3 µs between ranks: that much error is allowed
        assert abs(got[rank] + skew * 1000) <= 5_000, (rank, got[rank])


def test_two_kinds_of_groups_with_sequence_numbers(tmp_path: Path) -> None:
    summaries = _job(tmp_path)
    matched = match(summaries)
    assert matched.matched_by == "process group and sequence number" and matched.unmatched == 0
    _one_size_and_kind_per_collective(matched.rows)
    ranks = matched.rows.group_by(KEY).agg(pl.col("rank").sort().cast(pl.String).str.join(",").alias("r"))
    assert dict(ranks.group_by("process_group").agg(pl.col("r").unique().first()).iter_rows()) == {
        "tp01": "0,1", "tp23": "2,3", "dp": "0,1,2,3",
    }  # fmt: skip
    result = analyze(summaries)
    _offsets_undo_the_skew(result)
    dp = result.collectives.filter(pl.col("process_group") == "dp")
    assert dp.height == 4 and set(dp["last_rank"]) == {2}
    # rank 2 launches 2 ms late; its arrival is 2 ms after the others' on the aligned clocks
    assert dp["late_by_ns"].min() > 1_990_000 and dp["late_by_ns"].max() < 2_010_000  # type: ignore[operator]
    # the transfer is the last rank's duration: 400 µs, + 2 µs of its planted end jitter
    assert dp["transfer_ns"].min() == int((DP_TRANSFER_US + 2) * 1000)
    top = result.late.row(0, named=True)
    assert top["rank"] == 2 and top["work"] == "extra_host_work" and top["cause"] == "host"
    assert abs(top["work_ns"] - 2_000_000) < 1_000 and top["others_work_ns"] == 0


def test_the_late_arrival_finding_names_the_rank_and_its_work(tmp_path: Path) -> None:
    report = analyze_job(_job(tmp_path))
    late = next(f for f in report.findings if f.id == "late_arrival")
    assert late.evidence.rank == 2 and "extra_host_work" in late.title and late.confidence == "high"
    assert abs(late.saving_ns - 2_000_000) < 20_000


def test_sequence_numbers_survive_a_rank_that_starts_late(tmp_path: Path) -> None:
    matched = match(_job(tmp_path, starts_late=(1,)))
    assert matched.matched_by == "process group and sequence number"
    _one_size_and_kind_per_collective(matched.rows)
    # rank 1 has no step 0: the tp01 all-reduce of step 0 is on rank 0 alone
    assert matched.unmatched == 1
    assert matched.rows.filter((pl.col("process_group") == "dp") & (pl.col("seq") == 0))["rank"].sort().to_list() == [0, 2, 3]


def test_without_sequence_numbers_the_order_is_shifted_to_agree(tmp_path: Path) -> None:
    summaries = _job(tmp_path, seq=False, starts_late=(1,))
    assert all(s.collectives["seq"].is_null().all() for s in summaries)
    matched = match(summaries)
    assert matched.matched_by == "order within the process group"
    _one_size_and_kind_per_collective(matched.rows)
    # tp01's all-reduces all look alike: only their (aligned) ends tell rank 1's first one is step 1's
    tp01 = matched.rows.filter(pl.col("process_group") == "tp01")
    assert tp01.group_by(KEY).agg(pl.col("step").n_unique())["step"].max() == 1
    assert matched.unmatched == 1
    _offsets_undo_the_skew(analyze(summaries))


def test_bus_bandwidth_by_the_nccl_tests_formulas(tmp_path: Path) -> None:
    result = analyze(_job(tmp_path))
    table = result.collectives
    algbw = table["bytes"] / table["transfer_ns"]
    n = pl.Series([4 if g == "dp" else 2 for g in table["process_group"]], dtype=pl.Float64)
    assert ((table["algbw_gbps"] - algbw).abs() < 1e-9).all()
    assert ((table["busbw_gbps"] - algbw * 2 * (n - 1) / n).abs() < 1e-9).all()
    assert result.link == "NVLink 4" and result.link_gbps == 450.0
    assert ((table["link_share"] - table["busbw_gbps"] / 450.0).abs() < 1e-9).all()


def test_link_peak_only_where_the_trace_tells_it(tmp_path: Path) -> None:
    summaries = _job(tmp_path)
    apart = [replace(s, host_name=f"node{s.rank // 2}") for s in summaries]
    assert job_link(apart).peak_gbps is None and "2 hosts" in job_link(apart).reason
    pcie = [replace(s, device_name="NVIDIA H100 PCIe") for s in summaries]
    assert job_link(pcie).name == "PCIe Gen5 x16"


def test_small_messages_far_below_the_link_are_a_finding(tmp_path: Path) -> None:
    from traceinsight.analysis.job.coll_findings import slow_collective

    result = analyze(_job(tmp_path, late_rank=-1))
    # 67 µs per step to save: material against a 1 ms step (the job's 10 ms step would not be)
    step = 1_000_000.0
    # the 1 MiB tensor-parallel all-reduces run at 26 GB/s of NVLink's 450: exposed and slow;
    # merged at the job's best all-reduce bandwidth they would cost a fraction of their time
    found = slow_collective(result, step)
    assert found is not None and found.id == "slow_collective"
    assert "allreduce" in found.title and "1024 KiB" in found.title and "bucket_cap_mb" in found.fix
    tp = result.collectives.filter(pl.col("process_group") != "dp")
    best = result.collectives["algbw_gbps"].max()
    expected = float((tp["transfer_ns"] - tp["bytes"] / best).sum()) / result.steps  # type: ignore[operator]
    assert abs(found.saving_ns - expected) <= 1


def test_job_perfetto_flows_join_each_waiting_rank_to_the_last(tmp_path: Path) -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    from traceinsight.render.job.perfetto import export_job_perfetto

    report = analyze_job(_job(tmp_path))
    parsed = pb.Trace()
    parsed.ParseFromString(export_job_perfetto(report, cache=False))
    flows: dict[int, list[tuple[int, str]]] = {}
    for packet in parsed.packet:
        if packet.HasField("track_event"):
            for flow in packet.track_event.flow_ids:
                flows.setdefault(flow, []).append((packet.timestamp, packet.track_event.name))
    matched = match(report.summaries).rows
    assert len(flows) == matched.filter(~pl.col("is_last")).height
    for ends in flows.values():
        (t0, waiting), (t1, last) = sorted(ends)
        assert last.endswith(" last") and last.startswith(waiting) and t0 <= t1
    # on the aligned clocks the data-parallel all-reduces start 2 ms apart, not 5 ms (rank 3's skew)
    dp = sorted(ts for ends in flows.values() for ts, name in ends if "(pg dp)" in name and name.endswith("last"))
    waits = sorted(ts for ends in flows.values() for ts, name in ends if "(pg dp)" in name and not name.endswith("last"))
    assert 1_990_000 < dp[0] - waits[0] < 2_010_000


REAL_JOBS = {
    "ddp_train (NCCL, 2 ranks)": [str(SAMPLES / f"ddp_train.rank{r}.json.gz") for r in range(2)],
    "comm_bucket_before (NCCL)": str(SAMPLES / "comm" / "comm_bucket_before.rank*.json.gz"),
    "comm_bucket_after (NCCL)": str(SAMPLES / "comm" / "comm_bucket_after.rank*.json.gz"),
    "comm_a2a_before (NCCL all-to-all)": str(SAMPLES / "comm" / "comm_a2a_before.rank*.json.gz"),
    "comm_gloo_before (gloo)": str(SAMPLES / "comm" / "comm_gloo_before.rank*.json.gz"),
    "job_straggler (gloo, 4 ranks)": str(SAMPLES / "job_straggler.rank*.json.gz"),
}


@pytest.mark.parametrize("name", list(REAL_JOBS))
def test_every_collective_of_every_real_rank_is_matched(name: str) -> None:
    job = load_job(REAL_JOBS[name], engine="serial")
    matched = match(job.summaries)
    counts = [s.collectives.height for s in job.summaries]
    assert matched.unmatched == 0 and matched.rows.height == sum(counts) > 0
    assert (matched.rows.group_by(KEY).len()["len"] == len(job.summaries)).all()
    _one_size_and_kind_per_collective(matched.rows)
    result = analyze(job.summaries)
    # once aligned, a matched collective ends on every rank at about one instant: within 50 µs for
    # NCCL kernels (90 % of them), 1 ms for gloo's host spans
    limit = 1_000_000 if "gloo" in name else 50_000
    assert result.end_spread_p90_ns < limit


def test_gloo_straggler_named_with_its_data_loading() -> None:
    result = analyze(load_job(REAL_JOBS["job_straggler (gloo, 4 ranks)"], engine="serial").summaries)
    top = result.late.row(0, named=True)
    # rank 2 sleeps 30 ms more per step inside data_loading (sample_traces/README.md)
    assert top["rank"] == 2 and top["work"] == "data_loading" and top["cause"] == "host"
    assert 28e6 < top["late_by_per_step_ns"] < 32e6
    assert result.link_gbps is None and "host-side" in result.link_reason


@pytest.mark.skipif(not HTA.is_dir(), reason="needs ../shared/third_party (HTA's test data)")
def test_hta_sampled_ranks_match_by_order_of_their_annotations() -> None:
    # two sampled ranks of a 128-rank job, written before Kineto recorded collective args: the
    # kinds come from the nccl:* annotations around the SendRecv kernels
    job = load_job([str(HTA / "sampled_rank-0.json.gz"), str(HTA / "sampled_rank-1.json.gz")], engine="serial", allow_missing=True)
    matched = match(job.summaries)
    assert matched.matched_by == "order within the process group" and matched.unmatched == 0
    assert matched.rows.height == 20
    kinds = matched.rows.group_by(KEY).agg(pl.col("kind").n_unique())
    assert kinds["kind"].max() == 1
    assert sorted(matched.rows.filter(pl.col("rank") == 0)["kind"].value_counts().rows()) == [
        ("all_to_all", 4), ("allgather", 2), ("allreduce", 4),
    ]  # fmt: skip
    assert analyze(job.summaries).link_gbps is None
