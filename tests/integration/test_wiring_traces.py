"""The classifier and the device model as the loader, breakdown, bound and job analyses see
them, on third-party traces (skipped where ``/work/shared`` is absent) and hand-made ones."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.findings_helpers import write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.classify import COLLECTIVES
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.job.collectives import kind_of
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections import breakdown
from traceinsight.trace.loader import load

ROOT = Path(__file__).resolve().parents[2]
HTA = ROOT.parent / "shared" / "third_party" / "hta"
if not HTA.exists():  # worktrees sit beside the shared folder, checkouts inside it
    HTA = Path(__file__).resolve().parents[3].joinpath("shared/third_party/hta")


def third_party(name: str) -> Path:
    path = HTA / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def test_mtia_dma_and_stream_events_are_copies_and_sync_not_kernels() -> None:
    trace = load(third_party("mtia_inference_rank_0.json.gz"), cache=False)
    kinds = dict(trace.kernels.group_by(pl.col("name").cast(pl.String)).agg(pl.col("kind").cast(pl.String).first()).iter_rows())
    assert kinds["dma_request"] == "memcpy"
    assert "event_wait" not in kinds and "event_record" not in kinds  # sync markers: no busy time
    assert kinds["merge"] == "kernel"
    sync = trace.events.filter(pl.col("kind").cast(pl.String) == "sync")["name"].cast(pl.String).unique().sort().to_list()
    assert sync == ["event_record", "event_wait"]
    # a stream waiting for another is not compute: the breakdown's compute is below the union
    # of everything MTIA recorded on the device
    result = breakdown.run(trace, AnalysisConfig())
    groups = dict(result.by_device.group_by("category").agg(pl.col("dur_ns").sum()).iter_rows())
    assert groups.get("memcpy_other", 0) > 0


def test_unlinked_work_after_traced_launches_on_its_stream_is_not_called_launched_before(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 500)
    t.gpu("early_kernel", 5, 3, stream=7)
    t.events[-2]["args"]["correlation"] = 999_001  # its launch is not in the trace ...
    t.events[-2]["name"] = "cudaLaunchKernel_elsewhere"
    t.gpu("linked_kernel", 20, 3, stream=7)
    t.gpu("late_unlinked", 40, 3, stream=7)
    t.events[-2]["args"]["correlation"] = 999_002  # ... nor this one's, which ran after a linked one
    warnings = load(t.write(tmp_path / "orphans.json"), cache=False).meta.warnings
    assert any(w.startswith("1 GPU events were launched before the trace window") for w in warnings), warnings
    assert any(w.startswith("1 GPU events have no launch call linked") for w in warnings), warnings


def test_symmetric_memory_all_reduce_counts_as_communication(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 3_000)
    t.host("aten::mm", 5, 3)
    t.gpu("void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 8>(c10::BFloat16**, c10::BFloat16*, unsigned long, unsigned long, unsigned int**, unsigned long, unsigned long)", 100, 1_000)
    t.gpu("cross_device_reduce_1stage<__nv_bfloat16, 8>", 1_200, 500)
    result = breakdown.run(write_h200(t, tmp_path / "symm.json"), AnalysisConfig())
    groups = dict(result.by_device.group_by("category").agg(pl.col("dur_ns").sum()).iter_rows())
    assert groups["communication"] == 1_500_000
    assert "compute" not in groups


def test_job_collective_kinds_are_spelled_as_the_classifier_spells_them() -> None:
    names = ["allreduce", "_allgather_base", "reduce_scatter_tensor_coalesced", "all_to_all_single", "broadcast", "send", "barrier"]
    got = pl.select(kind_of(pl.Series(names))).to_series().to_list()
    assert got == ["allreduce", "allgather", "reduce_scatter", "all_to_all", "broadcast", "send_recv", "barrier"]
    assert set(got) - {"barrier"} <= set(COLLECTIVES)


def test_trace_without_device_properties_gets_its_architecture_from_kernel_names() -> None:
    # HTA's sampled ranks carry no deviceProperties; their cuBLAS/CUTLASS kernels are sm_80 builds
    trace = load(third_party("sampled_rank-0.json.gz"))
    model = device_model.from_trace(trace)
    assert (model.vendor, model.architecture) == ("nvidia", "ampere")
    assert model.peaks is None  # the part itself is not known: no peak-based figures
    assert "tf32" in model.matrix_precisions


def test_a100_trace_prices_the_roofline_with_its_peaks() -> None:
    trace = load(third_party("cupti_counters.json.gz"))
    model = device_model.from_trace(trace)
    assert model.part == "a100-40gb" and model.architecture == "ampere"


def test_v100_trace_is_no_unknown_device(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 3_000)
    t.host("aten::mm", 5, 3, args={"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["float", "float"]})
    t.gpu("volta_sgemm_128x64_nn", 10, 2_800, launch_ts=6)
    path = t.write(tmp_path / "v100.json")
    text = path.read_text().replace('"name": "Hand-made GPU"', '"name": "Tesla V100-SXM2-16GB", "computeMajor": 7, "computeMinor": 0')
    path.write_text(text)
    bound = run_one(load(path, cache=False), "bound", AnalysisConfig())
    assert bound.roofline_available and bound.peaks is not None and bound.peaks["key"] == "v100-sxm2"
