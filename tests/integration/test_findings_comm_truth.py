"""Communication findings against a measured fix (``sample_traces/catalogue/``, recorded on an
H100 by two ranks sharing it over gloo): ``dist.all_reduce`` on each of the 96 gradients after
backward (``comm_perparam``) vs DDP's buckets during backward (``comm_ddp``). Step times were
measured with CUDA events outside the profiler (``timings.json``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.analyses import analysed
from tests.findings_helpers import by_id
from traceinsight.analysis.findings import FindingsResult

CATALOGUE = Path(__file__).resolve().parents[2] / "sample_traces" / "catalogue"
TIMINGS = json.loads((CATALOGUE / "timings.json").read_text())


def measured_ms(pair: str, side: str, rank: int) -> float:
    row = next(r for r in TIMINGS if r["pair"] == pair and r["side"] == side and r.get("rank") == rank)
    return float(row["ms"])


@functools.cache
def result(name: str) -> FindingsResult:
    report = analysed(CATALOGUE / f"{name}.json.gz")  # the run's one analysis (tests/analyses.py)
    found = report.sections["findings"]
    assert isinstance(found, FindingsResult)
    return found


def _saving_ms(f: Any) -> float:
    return float(f.saving_ns) / 1e6


@pytest.mark.parametrize("rank", [0, 1])
def test_per_parameter_allreduce_saving_matches_the_measured_fix(rank: int) -> None:
    before = result(f"comm_perparam.rank{rank}")
    f = by_id(before, "allreduce_per_parameter")
    assert f is not None and f.material
    measured = measured_ms("comm", "before", rank) - measured_ms("comm", "after", rank)
    predicted = _saving_ms(f)
    assert measured / 1.5 <= predicted <= measured * 1.5, (predicted, measured)
    figures = dict(f.evidence.figures)
    assert figures["allreduce_calls_per_step"] == 96 and figures["grad_tensors_per_step"] == 96
    assert "DistributedDataParallel" in f.fix


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_buckets_are_not_per_parameter(rank: int) -> None:
    after = result(f"comm_ddp.rank{rank}")
    f = by_id(after, "allreduce_per_parameter")
    assert f is None or not f.material


@pytest.mark.parametrize("rank", [0, 1])
def test_gloo_on_cuda_tensors_is_named_on_both_sides(rank: int) -> None:
    # Both runs reduce through host memory: what is left after bucketing is gloo's own cost.
    for name in (f"comm_perparam.rank{rank}", f"comm_ddp.rank{rank}"):
        f = by_id(result(name), "cpu_collectives")
        assert f is not None, name
        assert "init_process_group('nccl')" in f.fix
    after = by_id(result(f"comm_ddp.rank{rank}"), "cpu_collectives")
    assert after.material
    # never more than the step the fix was measured at
    assert _saving_ms(after) < measured_ms("comm", "after", rank)


# ---- third-party: the HTA sample of a DLRM-like job (2 of its 128 ranks, A100) ------------------

HTA = Path(__file__).resolve().parents[3].joinpath("shared/third_party/hta")


def hta(name: str) -> Path:
    path = HTA / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


@pytest.mark.parametrize("rank", [0, 1])
def test_sampled_rank_all_to_all_gets_the_embedding_fix(rank: int) -> None:
    found = analysed(hta(f"sampled_rank-{rank}.json.gz")).sections["findings"]
    assert isinstance(found, FindingsResult)
    a2a = by_id(found, "exposed_all_to_all")
    # Named with its breakdown share (claim_pct: exposed all-to-all time, 8-14 % of the
    # window); the replay of these sampled ranks finds no step shortened by hiding it, so the
    # saving shown is the replayed one, below materiality.
    assert a2a is not None and a2a.claim_pct is not None and a2a.claim_pct > 5
    # NCCL ran the all-to-all as SendRecv kernels; the nccl:all_to_all span says what it was
    assert a2a.evidence.regions[0].name == "all_to_all"
    assert "TrainPipelineSparseDist" in a2a.fix and "bucket_cap_mb" not in a2a.fix
    rest = by_id(found, "exposed_communication")
    assert rest is not None
    assert {r.name for r in rest.evidence.regions} == {"allgather", "allreduce"}
    # the two split the exposed time that one finding held, never more
    comm = found.window_ns and (a2a.saving_window_ns + rest.saving_window_ns) / found.window_ns
    assert 0 < comm <= 1


def test_sampled_ranks_job_names_the_all_to_all() -> None:
    import traceinsight as ti

    hta("sampled_rank-0.json.gz")
    job = ti.load_job([str(HTA / "sampled_rank-0.json.gz"), str(HTA / "sampled_rank-1.json.gz")], allow_missing=True, cache=False)
    report = ti.analyze(job)
    exposed = next(f for f in report.job_findings.findings if f.id == "exposed_communication")  # type: ignore[union-attr]
    assert exposed.fix.startswith("overlap the collectives with compute, by kind: all-to-all:")
    assert "TrainPipelineSparseDist" in exposed.fix


def test_collectives_nothing_waits_on_keep_their_exposed_share() -> None:
    # MI300X ResNet training: 64 % of the window is exposed communication, but the trace
    # records no cross-stream wait on the collectives, so the replay cannot see the work that
    # waited for them (hiding them replays as a 0 % saving). The finding keeps the breakdown's
    # exposed share, one confidence step lower, and says why.
    path = HTA.parent / "tracelens" / "mi300_resnet_act_checkpoint.json.gz"
    if not path.exists():
        pytest.skip("third-party traces not present")
    found = analysed(path).sections["findings"]
    assert isinstance(found, FindingsResult)
    f = by_id(found, "exposed_communication")
    assert f is not None and f.material and f.saving_pct > 20
    assert f.confidence == "low" and "no cross-stream wait" in f.confidence_reason
    assert not f.method.startswith("replayed")


@pytest.mark.parametrize("rank", [0, 1])
def test_a_collectives_own_host_time_and_syncs_are_left_to_the_communication_findings(rank: int) -> None:
    # gloo stages each CUDA gradient through host memory: its spans hold host work and
    # stream syncs. Those are the all-reduces' cost, which bucketing cuts (allreduce_per_parameter
    # leads); host_bound and host_sync must not offer them as host work or syncs to remove.
    r = result(f"comm_perparam.rank{rank}")
    assert r.findings[0].id == "allreduce_per_parameter"
    for f in (*r.findings, *r.not_material):
        if f.id in ("host_bound", "host_sync"):
            assert not any(g.name.startswith(("gloo:", "c10d::")) for g in f.evidence.regions), f.id
