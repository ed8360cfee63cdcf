"""Documented thresholds exactly at their edge (docs/findings.md, docs/gaps.md, docs/bound.md),
on hand-made traces (written by hand, not recorded), with the confidence each result states.
Times in the builders are µs, like Kineto's.

The neighbours on both sides are in test_findings_handmade.py; here the value sits on the
threshold itself, where ``>=`` and ``>`` part ways.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceinsight as ti
from tests.findings_helpers import by_id, findings, ids, write_h200
from tests.handmade import HandMadeTrace
from tests.unit.test_findings_handmade import SGEMM, drained_trace, gap_trace, gemm_trace
from traceinsight.analysis.findings.catalogue import (
    LAUNCH_SHORT_PCT,
    MATERIALITY_PCT,
    MEMORY_PRESSURE_SHARE,
    SMALL_GEMM_NS,
    SYNC_RETURN_TOLERANCE_NS,
    TENSOR_CORE_EFFICIENCY,
)
from traceinsight.analysis.sections.memory import MemoryResult

DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
ADD = "void at::native::vectorized_elementwise_kernel<4, add>"


def test_the_documented_values() -> None:
    # The docs state these numbers; a change here is a change to document.
    assert (MATERIALITY_PCT, LAUNCH_SHORT_PCT, MEMORY_PRESSURE_SHARE) == (1.0, 30.0, 0.9)
    assert (SMALL_GEMM_NS, SYNC_RETURN_TOLERANCE_NS) == (50_000, 50_000)


# -- materiality: a saving of exactly 1 % is material ---------------------------------------------


@pytest.mark.parametrize(("idle_us", "material"), [(100.0, True), (99.0, False)])
def test_materiality_at_exactly_one_percent(tmp_path: Path, idle_us: float, material: bool) -> None:
    trace = write_h200(gap_trace(tmp_path, idle_us, DATALOADER), tmp_path / "dl.json")
    result = findings(trace)
    assert result.window_ns == 10_000_000
    f = by_id(result, "dataloader_stall")
    assert f is not None
    assert f.saving_pct == pytest.approx(idle_us / 100)
    assert f.material is material
    assert ("dataloader_stall" in ids(result)) is material
    assert f.confidence == "high"
    assert f.overlap is None  # the only claim on the idle time: nothing scaled, no note


# -- launch-bound: exactly 30 % of kernels launched after the GPU ran out of work ---------------


def waited_trace(waited: int, total: int = 100) -> HandMadeTrace:
    """Hand-made: ``total`` kernels of 50 µs with 5 µs idle between them (below the gap
    threshold); kernels 1 to ``waited`` are launched by calls that return 3 µs after the previous
    kernel ended (the GPU waited for them), the others (the first included: nothing ran before
    it) by calls that return while the previous kernel still runs."""
    t = HandMadeTrace()
    ts = 70.0
    t.step(1, 0, 100_000)
    for i in range(total):
        lead_us = 7.0 if 1 <= i <= waited else 60.0
        t.host(f"aten::op{i % 10}", ts - lead_us - 1, 7)  # no loop of a few ops (repeated_launches)
        t.gpu(ADD, ts, 50.0, launch_ts=ts - lead_us, launch_dur=5.0)
        ts += 55.0
    t.events[0]["dur"] = ts
    return t


@pytest.mark.parametrize(("waited", "found"), [(30, True), (29, False)])
def test_launch_bound_at_exactly_thirty_percent_waited_kernels(
    tmp_path: Path, waited: int, found: bool
) -> None:
    result = findings(write_h200(waited_trace(waited), tmp_path / "launch.json"))
    f = by_id(result, "launch_bound")
    assert (f is not None) is found
    if f is not None:
        assert f.material
        # The 5 µs below-threshold slices before the kernels that waited are what is counted.
        assert f.saving_window_ns == waited * 5_000
        assert f.confidence == "medium"  # under half of the kernels waited


# -- host_sync: a gap opening exactly 50 µs after the sync returned is the sync's -----------------


@pytest.mark.parametrize(("after_return_us", "opened"), [(47.0, True), (48.0, False)])
def test_sync_return_tolerance_edge(tmp_path: Path, after_return_us: float, opened: bool) -> None:
    # .item() returns at 5010 µs; the gap opens 3 µs + after_return_us later: 50 or 51 µs.
    result = findings(write_h200(drained_trace(after_return_us), tmp_path / "drain.json"))
    sync = by_id(result, "host_sync")
    if opened:
        assert sync is not None and sync.material
        assert sync.saving_window_ns == pytest.approx(600_000, abs=1_000)
        assert sync.confidence == "high"
    else:
        assert sync is None or sync.saving_window_ns <= 60_000


# -- sequential small GEMMs: a GEMM of exactly 50 µs is not small ------------------------------


@pytest.mark.parametrize(("dur_us", "found"), [(50.0, False), (49.999, True)])
def test_small_gemm_duration_edge(tmp_path: Path, dur_us: float, found: bool) -> None:
    t = gemm_trace(SGEMM, [[32, 32], [32, 32]], ["float", "float"], dur_us, repeat=8)
    f = by_id(findings(write_h200(t, tmp_path / "seq.json")), "sequential_small_gemms")
    assert (f is not None) is found
    if found:
        assert f.evidence.ops[0].calls == 8
        assert f.confidence == "medium"


# -- memory pressure: reserved exactly 90 % of the device ----------------------------------------


@pytest.mark.parametrize(("ninetieths", "found"), [(81, True), (80, False), (81.5, True)])
def test_memory_pressure_at_exactly_ninety_percent(
    tmp_path: Path, ninetieths: float, found: bool
) -> None:
    # A device of 90 GiB; reserved 81 GiB is exactly 0.9 of it.
    t = gemm_trace(SGEMM, [[64, 64], [64, 64]], ["float", "float"], 50)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 90 * 2**30, "numSms": 132}
        ],
        "baseTimeNanoseconds": t.base_ns,
        "traceEvents": t.events,
    }
    path = tmp_path / "mem.json"
    path.write_text(json.dumps(doc))
    trace = ti.load(path, cache=False)
    memory = MemoryResult(
        peaks=pl.DataFrame(
            {
                "device": ["cuda:0"],
                "device_index": [0],
                "peak_reserved_bytes": [int(ninetieths * 2**30)],
            }
        )
    )
    f = by_id(findings(trace, memory=memory), "memory_pressure")
    assert (f is not None) is found
    if found:
        assert f.material and f.saving_pct == 0.0 and f.confidence == "high"
        assert f.confidence_reason == f"peak reserved {ninetieths:.1f} GiB of 90.0 GiB"
        assert dict(f.evidence.figures)["share_pct"] == round(
            100 * ninetieths / 90, 2
        )  # 90.56 for 81.5


# -- gaps: a gap of exactly the threshold (10 µs) is listed --------------------------------------


@pytest.mark.parametrize(("idle_ns", "listed"), [(10_000, True), (9_999, False)])
def test_gap_of_exactly_the_threshold_is_listed(tmp_path: Path, idle_ns: int, listed: bool) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 1_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 490, launch_ts=2)
    t.host("aten::add", 450, 3)
    t.gpu(ADD, 500 + idle_ns / 1_000, 100, launch_ts=451)
    path = tmp_path / "gap.json"
    write_h200(t, path)
    gaps = ti.analyze(path, only=["gaps"], cache=False).gaps
    inner = gaps.gaps.filter(pl.col("start_ns") == 500_000)
    assert inner.height == int(listed)
    if listed:
        assert inner["dur_ns"][0] == 10_000
        # The launch returned 47 µs before the gap: the work was queued, the device waited.
        assert inner["cause"][0] == "device_wait"


# -- bound: "mostly idle" from exactly 50 % idle; a high idle label from exactly 70 % -------------


def idle_step(busy_us: float, idle_us: float) -> HandMadeTrace:
    """Hand-made: a 1 ms step; a kernel from 10 µs for ``busy_us``, then ``idle_us`` of idle
    while the host is in an op that launches nothing, then a kernel to the step's end. The
    first 10 µs are idle too."""
    t = HandMadeTrace()
    t.step(1, 0, 1_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, busy_us, launch_ts=2)
    t.host("preprocess", 12 + busy_us, idle_us - 10)
    t.host("aten::add", busy_us + idle_us, 3)
    t.gpu(ADD, 10 + busy_us + idle_us, 990 - busy_us - idle_us, launch_ts=busy_us + idle_us + 1)
    return t


@pytest.mark.parametrize(
    ("busy_us", "idle_us", "label", "confidence"),
    [
        (490.0, 490.0, "overhead", "medium"),  # idle exactly 50 %: mostly idle, one cause
        (491.0, 489.0, "memory", "low"),  # 49.9 %: judged on its kernels
        (200.0, 690.0, "overhead", "high"),  # idle exactly 70 %, one cause ≥ 60 %
        (201.0, 689.0, "overhead", "medium"),  # 69.9 %
    ],
)
def test_bound_label_and_confidence_at_the_idle_share_edges(
    tmp_path: Path, busy_us: float, idle_us: float, label: str, confidence: str
) -> None:
    path = tmp_path / "bound.json"
    write_h200(idle_step(busy_us, idle_us), path)
    regions = ti.analyze(path, only=["bound"], cache=False).bound.regions
    step = regions.filter(pl.col("kind") == "step").row(0, named=True)
    assert step["idle_ns"] == (idle_us + 10) * 1_000 and step["dur_ns"] == 1_000_000
    assert (step["label"], step["confidence"]) == (label, confidence)
    assert "launch_overhead" in step["reason"]


def test_a_small_pageable_copy_is_listed_as_not_material(tmp_path: Path) -> None:
    # Hand-made: a busy 10 ms step with one 1 MB pageable copy of 50 µs: at 25 GB/s it would
    # take 40 µs, a saving of 10 µs (0.1 %). Only memory_pressure is material at any size.
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("aten::copy_", 4_990, 9)
    t.gpu(
        "Memcpy HtoD (Pageable -> Device)",
        5_000,
        50,
        cat="gpu_memcpy",
        launch_ts=4_992,
        launch_name="cudaMemcpyAsync",
        args={"bytes": 1_000_000, "memory bandwidth (GB/s)": 20.0},
    )
    t.host("aten::add", 5_040, 3)
    t.gpu(ADD, 5_050, 4_940, launch_ts=5_042)
    result = findings(write_h200(t, tmp_path / "small.json"))
    f = by_id(result, "pageable_memcpy")
    assert f is not None and f.pool == "memcpy"
    assert f.saving_window_ns == 10_000 and f.saving_pct == 0.1
    assert not f.material and "pageable_memcpy" not in ids(result)


def test_a_share_near_all_of_the_window(tmp_path: Path) -> None:
    # Hand-made: a 10 ms step idle but for two 10 µs kernels, the host in the DataLoader.
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 10, launch_ts=2)
    t.host(DATALOADER, 25, 9_950, cat="user_annotation")
    t.host("aten::add", 9_978, 3)
    t.gpu(ADD, 9_985, 10, launch_ts=9_979)
    f = by_id(findings(write_h200(t, tmp_path / "all.json")), "dataloader_stall")
    assert f is not None
    assert f.saving_pct == pytest.approx(99.65, abs=0.01)  # 9.965 ms of 10 ms


def test_evidence_names_the_rank_of_a_job_member(tmp_path: Path) -> None:
    t = gap_trace(tmp_path, 500.0, DATALOADER)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 143 * 2**30, "numSms": 132}
        ],
        "distributedInfo": {"rank": 3, "world_size": 4, "backend": "nccl"},
        "baseTimeNanoseconds": t.base_ns,
        "traceEvents": t.events,
    }
    path = tmp_path / "rank3.json"
    path.write_text(json.dumps(doc))
    f = by_id(findings(ti.load(path, cache=False)), "dataloader_stall")
    assert f is not None and f.evidence.rank == 3
    alone = by_id(findings(write_h200(t, tmp_path / "alone.json")), "dataloader_stall")
    assert alone is not None and alone.evidence.rank is None


# -- which copies block the host: device-to-pageable ones only ---------------------------------


def test_only_device_to_pageable_copies_block_the_host(tmp_path: Path) -> None:
    from traceinsight.analysis.findings.read.syncs import blocking_spans

    t = HandMadeTrace()
    t.step(1, 0, 1000)
    # the launch call of each copy spans the copy, as a blocking one would
    t.gpu(
        "Memcpy DtoH (Device -> Pageable)",
        20,
        50,
        cat="gpu_memcpy",
        launch_ts=10,
        launch_dur=70,
        launch_name="cudaMemcpyAsync",
    )
    t.gpu(
        "Memcpy DtoH (Device -> Pinned)",
        220,
        50,
        cat="gpu_memcpy",
        launch_ts=210,
        launch_dur=70,
        launch_name="cudaMemcpyAsync",
    )
    t.gpu(
        "Memcpy HtoD (Pageable -> Device)",
        420,
        50,
        cat="gpu_memcpy",
        launch_ts=410,
        launch_dur=70,
        launch_name="cudaMemcpyAsync",
    )
    # a kernel is never a blocking copy, whatever its name
    t.gpu("copy_DtoH_Pageable_kernel", 620, 50, launch_ts=610, launch_dur=70)
    spans = blocking_spans(ti.load(t.write(tmp_path / "copies.json"), cache=False))
    assert spans.select("start_ns", "end_ns", "blocked_ns").rows() == [(10_000, 80_000, 70_000)]


# -- gemm_misaligned: which dimensions, the vocabulary, fp8's multiple ----------------------------


def test_misaligned_dims_read_all_three_operands_of_addmm() -> None:
    from traceinsight.analysis.findings.detect.precision import misaligned_dims

    # bias first: the weight's output dimension is the third operand
    assert misaligned_dims("aten::addmm", "[[50257],[4096,768],[768,50257]]", 8) == [50257]


@pytest.mark.parametrize(
    ("name", "shapes", "vocab"),
    [
        ("aten::mm", "[[4096,768],[768,50257]]", 50257),  # hidden 768 → vocabulary: 65× wider
        ("aten::addmm", "[[50257],[4096,768],[768,50257]]", 50257),  # the bias is not a matrix
        (
            "aten::addmm",
            "[[4096,50257],[4096,768],[768,50257]]",
            50257,
        ),  # the last operand is the weight
        ("aten::bmm", "[[8,1024,64],[8,64,50304]]", 50304),  # batched: the last operand's last dim
        ("aten::mm", "[[4096,768],[768,3071]]", None),  # 4× is the threshold: 3071 < 3072
        ("aten::mm", "[[4096,768],[768,3072]]", 3072),
        ("aten::conv2d", "[[8,3,224,224],[50257,3,7,7]]", None),  # channels, never a vocabulary
    ],
)
def test_largest_output_dimension_is_a_vocabulary_only_where_it_widens_four_times(
    name: str, shapes: str, vocab: int | None
) -> None:
    from traceinsight.analysis.findings.detect.precision import _largest_n

    assert _largest_n(pl.DataFrame({"name": [name], "shapes": [shapes]})) == vocab


def test_vocabulary_fix_pads_to_a_multiple_of_64_and_other_dims_to_the_dtype_multiple() -> None:
    from traceinsight.analysis.findings.detect.precision import _misaligned_fix

    bad = pl.DataFrame(
        {
            "name": ["aten::mm", "aten::mm"],
            "dtype_class": ["bf16", "bf16"],
            "off": [[50257], [1001]],
        },
        schema={"name": pl.String, "dtype_class": pl.String, "off": pl.List(pl.Int64)},
    )
    text = _misaligned_fix(bad, 50257)
    assert (
        "the vocabulary (50257, the largest output dimension): vocab_size to a multiple of 64, 50257 → 50304"
        in text
    )
    assert "a hidden/feature dimension 1001 (bf16: multiples of 8) → 1008" in text


def test_fp8_gemms_need_multiples_of_16(tmp_path: Path) -> None:
    kernel = "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
    fp8 = ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn"]
    # 4104 is a multiple of 8, not of 16; 4096 is both
    t = gemm_trace(kernel, [[4096, 4104], [4104, 4096]], fp8, 300, repeat=4)
    f = by_id(findings(write_h200(t, tmp_path / "fp8.json")), "gemm_misaligned")
    assert f is not None
    assert (
        "a hidden/feature dimension 4104 (fp8: multiples of 16) → 4112" in f.fix
        and "4096 (" not in f.fix
    )
    # no aligned GEMM to learn the rate from: 75 % of the H200's dense fp8 peak (1979 TFLOP/s)
    fast_ns = 2 * 4096 * 4104 * 4096 / (1979e12 * TENSOR_CORE_EFFICIENCY) * 1e9
    assert f.saving_window_ns == pytest.approx(4 * (300_000 - fast_ns), rel=0.01)


def _gemm_steps(kernel: str, n: int, dtype: str) -> HandMadeTrace:
    """Four 2.83 ms steps, each one aten::mm of n³ in ``dtype`` running 2.8 ms as ``kernel``,
    then a synchronize (the step waits for its GEMM: the kernel is the step's critical path)."""
    t = HandMadeTrace()
    for s in range(4):
        base = s * 2830.0
        t.step(s + 1, base, 2830)
        t.host(
            "aten::mm",
            base + 10,
            8,
            args={"Input Dims": [[n, n], [n, n]], "Input type": [dtype, dtype]},
        )
        t.gpu(kernel, base + 20, 2800, launch_ts=base + 11)
        t.host("cudaDeviceSynchronize", base + 19, 2803, cat="cuda_runtime")
    return t


def test_fp32_saving_replayed_is_the_kernel_at_the_tf32_rate(tmp_path: Path) -> None:
    # four steps of one 2.8 ms fp32 4096³ GEMM: the replay scales the kernel to the TF32 target
    t = _gemm_steps(SGEMM, 4096, "float")
    result = ti.analyze(write_h200(t, tmp_path / "fp32_steps.json"), cache=False).findings
    f = by_id(result, "fp32_no_tensor_cores")
    assert result.replayed and f.method.startswith("replayed")
    assert f.saving_ns == pytest.approx(
        2_800_000 - 2 * 4096**3 / (494.5e12 * TENSOR_CORE_EFFICIENCY) * 1e9, rel=0.01
    )


@pytest.mark.parametrize(("align", "named"), [(1, True), (2, True), (4, False)])
def test_kernel_alignment_without_element_size_is_misaligned_at_two_elements_or_fewer(
    tmp_path: Path, align: int, named: bool
) -> None:
    # aligned shapes: only the kernel's name (CUTLASS alignN, no element size) can say it
    kernel = f"void cutlass::Kernel<cutlass_80_tensorop_gemm_128x128_32x3_nn_align{align}>(Params)"
    t = gemm_trace(
        kernel, [[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"], 300, repeat=4
    )
    f = by_id(findings(write_h200(t, tmp_path / f"align{align}.json")), "gemm_misaligned")
    assert (f is not None) is named


def test_fp64_saving_replayed_is_the_kernel_at_the_tf32_rate(tmp_path: Path) -> None:
    # four steps of one 2.8 ms fp64 2048³ GEMM: in fp32 on tensor cores (TF32, 75 % of peak)
    dgemm = "void gemmSN_NN_kernel<double, 128, 2, 4, 8, 3, 4, false>(cublasGemmSmallNParams<double const, double const, double>)"
    t = _gemm_steps(dgemm, 2048, "double")
    result = ti.analyze(write_h200(t, tmp_path / "fp64_steps.json"), cache=False).findings
    f = by_id(result, "fp64_compute")
    assert result.replayed and f.method.startswith("replayed")
    assert f.saving_ns == pytest.approx(
        2_800_000 - 2 * 2048**3 / (494.5e12 * TENSOR_CORE_EFFICIENCY) * 1e9, rel=0.01
    )


def test_the_last_operand_of_each_matmul_decides_the_widest_output() -> None:
    from traceinsight.analysis.findings.detect.precision import _largest_n

    ops = pl.DataFrame(
        {
            "name": ["aten::mm", "aten::addmm"],
            # the second op's middle operand is wide, its output (last operand's N) is not
            "shapes": ["[[4096,768],[768,50257]]", "[[4096,768],[4096,70000],[70000,3072]]"],
        }
    )
    assert _largest_n(ops) == 50257


# -- pageable copies: one pinned copy is enough to measure the bus; five ops of evidence ----------


def _copy(t: HandMadeTrace, ts: float, op: str, name: str, nbytes: int, dur_us: float) -> float:
    t.host(op, ts - 10, 9)
    t.gpu(
        name,
        ts,
        dur_us,
        cat="gpu_memcpy",
        launch_ts=ts - 8,
        launch_name="cudaMemcpyAsync",
        args={"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / dur_us / 1e3},
    )
    return ts + dur_us + 20


def test_a_single_pinned_copy_sets_the_rate(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 1)
    ts = _copy(t, 20.0, "aten::copy_", "Memcpy HtoD (Pageable -> Device)", 100_000_000, 20_000)
    ts = _copy(
        t, ts, "aten::copy_", "Memcpy HtoD (Pinned -> Device)", 100_000_000, 2_000
    )  # 50 GB/s
    t.events[0]["dur"] = ts
    f = by_id(findings(write_h200(t, tmp_path / "one_pinned.json")), "pageable_memcpy")
    assert f is not None and "(50.0 GB/s)" in f.method
    assert f.estimate_ns == pytest.approx(18_000_000, rel=0.001)  # 20 ms → 2 ms


def test_pageable_copy_evidence_lists_the_five_longest_ops(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 1)
    ts = 20.0
    for i, op in enumerate(["op_a", "op_b", "op_c", "op_d", "op_e", "op_f"]):
        ts = _copy(t, ts, op, "Memcpy HtoD (Pageable -> Device)", 10_000_000, 4_000 - 100 * i)
    t.events[0]["dur"] = ts
    f = by_id(findings(write_h200(t, tmp_path / "six_ops.json")), "pageable_memcpy")
    assert f is not None
    assert [o.name for o in f.evidence.ops] == ["op_a", "op_b", "op_c", "op_d", "op_e"]


# -- unfused_optimizer: a fused optimizer op on the host means it is fused already ------------------


@pytest.mark.parametrize(
    ("op", "cat", "found"),
    [
        ("aten::_fused_adamw_", "cpu_op", False),  # the host called the fused op
        ("aten::_fused_adamw_", "user_annotation", True),  # an annotation is no op call
        ("aten::_foreach_add_", "cpu_op", True),
    ],
)
def test_a_fused_optimizer_op_on_the_host_silences_unfused_optimizer(
    tmp_path: Path, op: str, cat: str, found: bool
) -> None:
    from tests.unit.test_reported_numbers import optimizer_trace

    t = optimizer_trace(10_000_000)
    t.host(op, 1_012, 5, cat=cat)
    result = findings(write_h200(t, tmp_path / "fused_op.json"))
    assert (by_id(result, "unfused_optimizer") is not None) is found


def test_an_optimizer_seen_only_in_the_warmup_step_is_still_read(tmp_path: Path) -> None:
    # The optimizer ran in the first (slow, warm-up) step only: that step is all there is to
    # read it from, so it is not left out as warm-up.
    from tests.unit.test_reported_numbers import optimizer_trace

    t = optimizer_trace(10_000_000)  # step 1: a 1 ms kernel, then four foreach kernels
    for n, start in ((2, 2_000.0), (3, 3_000.0)):
        t.step(n, start, 1_000)
        t.host("aten::add", start + 5, 3)
        t.gpu(ADD, start + 10, 500, launch_ts=start + 6)
    report = ti.analyze(write_h200(t, tmp_path / "warm_opt.json"), cache=False)
    assert report.steps.warmup_step == 1
    assert by_id(report.findings, "unfused_optimizer") is not None


@pytest.mark.parametrize(
    ("host", "idle_us", "named"),
    [
        ("aten::add", 150.0, False),
        # 394 + 3 + 3 µs in aten::add, which launched two kernels: exactly 200 µs per kernel,
        # still dispatch; 1 µs more is not (each kernel counts once, though aten::add is both
        # its own op and the outermost)
        ("aten::add", 395.0, False),
        ("aten::add", 396.0, True),
        ("aten::add", 2_000.0, True),
        ("aten::normal_", 150.0, True),
    ],
)
def test_host_bound_leaves_an_operator_that_only_dispatches_kernels_to_launch_bound(
    tmp_path: Path, host: str, idle_us: float, named: bool
) -> None:
    # Hand-made: a gap while the host is inside an operator. aten::add launches the step's two
    # kernels: with 150 µs in it (76 µs per kernel launched) its host time is dispatch,
    # launch_bound's; with 2 ms (1 ms per kernel, over the 200 µs a dispatch can take) it is
    # doing something else, and host_bound names it. aten::normal_ launches nothing (a tensor
    # filled on the host): host_bound names it.
    trace = write_h200(gap_trace(tmp_path, idle_us, host, cat="cpu_op"), tmp_path / "t.json")
    f = by_id(findings(trace), "host_bound")
    assert (f is not None and any(r.name == host for r in f.evidence.regions)) is named
