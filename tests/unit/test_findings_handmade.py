"""Each finding on hand-made traces (written by hand, not recorded), just below and just above
its threshold. Times in the builders are µs, like Kineto's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.findings_helpers import by_id, context, findings, ids, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.findings import FindingContext, find
from traceinsight.analysis.findings.catalogue import MATERIALITY_PCT, TENSOR_CORE_EFFICIENCY
from traceinsight.analysis.sections.compile import CompileResult
from traceinsight.analysis.sections.memory import MemoryResult
from traceinsight.analysis.window.assess import Flag
from traceinsight.analysis.window.spec import WindowResult

SGEMM = "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(Params)"
BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, add>"


def busy_frame(t: HandMadeTrace, end: float = 10_000.0) -> None:
    """Hand-made: one step over [0, end] µs with the GPU busy at both ends."""
    t.step(1, 0, end)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("aten::add", end - 20, 3)
    t.gpu(ADD, end - 10, 10, launch_ts=end - 19)


def gap_trace(
    tmp_path: Path,
    idle_us: float,
    host: str,
    cat: str = "user_annotation",
    inner: str | None = None,
) -> HandMadeTrace:
    """Hand-made: a 10 ms step, busy except one idle gap of ``idle_us`` after 5 ms while the
    host is inside ``host``."""
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host(host, 4_995, idle_us + 5 - 6, cat=cat)
    if inner:
        t.host(
            inner, 4_996, idle_us - 10, cat="cuda_runtime" if inner.startswith("cuda") else "cpu_op"
        )
    t.host("aten::add", 5_000 + idle_us - 5, 3)
    t.gpu(ADD, 5_000 + idle_us, 5_000 - idle_us, launch_ts=5_000 + idle_us - 4)
    return t


# -- idle-based findings: the materiality threshold ------------------------------------------


@pytest.mark.parametrize(("idle_us", "material"), [(90.0, False), (110.0, True)])
def test_dataloader_stall_at_the_materiality_edge(
    tmp_path: Path, idle_us: float, material: bool
) -> None:
    trace = write_h200(
        gap_trace(tmp_path, idle_us, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
        tmp_path / "dl.json",
    )
    result = findings(trace)
    f = by_id(result, "dataloader_stall")
    assert f is not None
    assert f.material is material
    assert ("dataloader_stall" in ids(result)) is material
    assert f.saving_pct == pytest.approx(100 * idle_us / result.window_ns * 1000, rel=0.05)
    assert "num_workers" in f.fix and "pin_memory=True" in f.fix
    assert f.evidence.regions[0].name.startswith("enumerate(DataLoader)")


def test_dataloader_with_workers_suggests_more_of_them(tmp_path: Path) -> None:
    trace = write_h200(
        gap_trace(tmp_path, 500, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"),
        tmp_path / "dl.json",
    )
    f = by_id(findings(trace), "dataloader_stall")
    # 0.5 ms of waiting in a 10 ms step: loading ~1.05x too slow, which more workers fix
    assert "worker processes deliver one batch" in f.fix and "Raise num_workers" in f.fix


def sync_trace(idle_us: float, sync_from: float = 4_000.0) -> HandMadeTrace:
    """Hand-made: a 10 ms step; .item() blocks the host in cudaStreamSynchronize from
    ``sync_from`` until the GPU drains at 5 ms, then the GPU idles ``idle_us`` until the host
    launches again."""
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("aten::item", sync_from - 10, 5_000 + idle_us - 8 - (sync_from - 10))
    t.host("aten::_local_scalar_dense", sync_from - 9, 5_000 + idle_us - 10 - (sync_from - 9))
    t.host("cudaStreamSynchronize", sync_from, 5_002 - sync_from, cat="cuda_runtime")
    t.host("aten::add", 5_000 + idle_us - 6, 3)
    t.gpu(ADD, 5_000 + idle_us, 5_000 - idle_us, launch_ts=5_000 + idle_us - 5)
    return t


@pytest.mark.parametrize(("idle_us", "material"), [(90.0, False), (110.0, True)])
def test_host_sync_at_the_materiality_edge(tmp_path: Path, idle_us: float, material: bool) -> None:
    trace = write_h200(sync_trace(idle_us), tmp_path / "sync.json")
    result = findings(trace)
    f = by_id(result, "host_sync")
    assert f is not None and f.material is material
    assert any(op.name in ("aten::item", "aten::_local_scalar_dense") for op in f.evidence.ops)
    assert ".item()" in f.fix


def test_host_sync_saving_is_capped_by_the_time_the_host_was_blocked(tmp_path: Path) -> None:
    # The host is blocked 40 µs only (it was busy launching before): removing the sync frees
    # 40 µs of host time, whatever the idle behind it (2 ms here).
    f = by_id(
        findings(write_h200(drained_trace(0.0, sync_us=40.0), tmp_path / "s.json")), "host_sync"
    )
    assert f is not None
    assert f.saving_window_ns == 40_000
    assert dict(f.evidence.figures)["sync_idle_ns"] >= 1_990_000


def test_host_bound_names_the_region_but_never_dynamo_internals(tmp_path: Path) -> None:
    trace = write_h200(gap_trace(tmp_path, 800, "preprocess_batch"), tmp_path / "host.json")
    f = by_id(findings(trace), "host_bound")
    assert f is not None and f.material and "preprocess_batch" in f.title
    dynamo = write_h200(gap_trace(tmp_path, 800, "TorchDynamo Cache Lookup"), tmp_path / "dyn.json")
    assert by_id(findings(dynamo), "host_bound") is None
    # any region name, whatever it begins with
    hashes = write_h200(gap_trace(tmp_path, 800, "## forward ##"), tmp_path / "hashes.json")
    f = by_id(findings(hashes), "host_bound")
    assert f is not None and "## forward ##" in f.title


def launch_trace(short: int, total: int = 100, *, lead_us: float = 7.0, ops: int = 10) -> HandMadeTrace:
    """Hand-made: ``total`` kernels launched by 5 µs calls that begin ``lead_us`` before their
    kernel, ``short`` of them 3 µs long (shorter than their launch), the rest 50 µs; 5 µs idle
    (below the gap threshold) between kernels. With the 7 µs lead each launch returns 3 µs after
    the previous kernel ended (the GPU waits for it); with 60 µs it returns while it still runs.
    The launching ops cycle through ``ops`` names: 10 is no loop of a few ops (a model's
    sequence), 1 is a loop of ``aten::mul`` (repeated_launches)."""
    t = HandMadeTrace()
    ts = max(10.0, lead_us + 2)
    t.step(1, 0, 100_000)
    for i in range(total):
        dur = 3.0 if i < short else 50.0
        t.host("aten::mul" if ops == 1 else f"aten::op{i % ops}", ts - lead_us - 1, 7)
        t.gpu(ADD, ts, dur, launch_ts=ts - lead_us, launch_dur=5.0)
        ts += dur + 5.0
    t.events[0]["dur"] = ts
    return t


@pytest.mark.parametrize(("lead_us", "found"), [(60.0, False), (7.0, True)])
def test_launch_bound_only_when_the_gpu_waited_for_launches(
    tmp_path: Path, lead_us: float, found: bool
) -> None:
    # Every kernel is shorter than its launch in both; only where the launches return after the
    # GPU ran out of work did the GPU wait for them. With the host ahead, the 5 µs gaps are the
    # device's own dispatch between queued kernels.
    result = findings(write_h200(launch_trace(100, lead_us=lead_us), tmp_path / "launch.json"))
    assert ("launch_bound" in ids(result)) is found
    if found:
        f = by_id(result, "launch_bound")
        assert f.material and "CUDA graphs" in f.fix
        assert 0 < f.saving_pct < 100


def test_a_loop_of_one_op_is_named_as_the_cause_of_the_launch_waits(tmp_path: Path) -> None:
    # The same waits, all from 100 calls of aten::mul in a row: the loop is the cause, priced
    # first, and launch_bound only lists what it adds (nothing: every launch was the loop's).
    result = findings(write_h200(launch_trace(100, ops=1), tmp_path / "loop.json"))
    assert ids(result)[0] == "repeated_launches"
    assert "aten::mul 100 times per step" in result.findings[0].title


def test_a_blocking_copy_is_not_a_launch(tmp_path: Path) -> None:
    """Hand-made: a kernel, then a 2 ms host-to-device copy through a blocking
    hipMemcpyWithStream (ROCm's blocking copy), then kernels queued well ahead: the GPU waited
    for the copy, never for a kernel launch."""
    t = HandMadeTrace()
    t.step(1, 0, 3_000)
    t.host("aten::mul", 1, 7)
    t.gpu(ADD, 5, 3, launch_ts=2, launch_dur=2.0)
    t.host("aten::copy_", 10, 2_020)
    t.gpu(
        "Memcpy HtoD (Pageable -> Device)",
        2_000,
        20,
        cat="gpu_memcpy",
        launch_ts=20,
        launch_dur=2_005,
        launch_name="hipMemcpyWithStream",
    )
    ts = 2_100.0
    for _ in range(20):
        t.host("aten::mul", ts - 80, 7)
        t.gpu(ADD, ts, 40, launch_ts=ts - 79, launch_dur=5.0)
        ts += 42
    result = findings(write_h200(t, tmp_path / "copy.json"))
    assert "launch_bound" not in ids(result, material_only=False)


# -- GEMM arithmetic ---------------------------------------------------------------------------


def gemm_trace(
    kernel: str, dims: list[list[int]], types: list[str], dur_us: float, *, repeat: int = 1
) -> HandMadeTrace:
    """Hand-made: ``repeat`` aten::mm calls with these shapes/dtypes, each one kernel of dur_us."""
    t = HandMadeTrace()
    t.step(1, 0, 200 + repeat * (dur_us + 20))
    ts = 20.0
    for _ in range(repeat):
        t.host("aten::mm", ts - 10, 8, args={"Input Dims": dims, "Input type": types})
        t.gpu(kernel, ts, dur_us, launch_ts=ts - 9)
        ts += dur_us + 20
    return t


def test_fp32_gemm_without_tensor_cores_is_found_with_its_saving(tmp_path: Path) -> None:
    # 4096^3 fp32 GEMM in 2.8 ms (~49 TFLOP/s): at 75 % of 494.5 TF32 TFLOP/s it takes 0.37 ms.
    t = gemm_trace(SGEMM, [[4096, 4096], [4096, 4096]], ["float", "float"], 2_800)
    result = findings(write_h200(t, tmp_path / "fp32.json"))
    assert ids(result)[0] == "fp32_no_tensor_cores"
    f = result.findings[0]
    expected_ns = 2_800_000 - 2 * 4096**3 / (494.5e12 * TENSOR_CORE_EFFICIENCY) * 1e9
    assert f.saving_window_ns == pytest.approx(expected_ns, rel=0.01)
    assert f.confidence == "high"
    assert "set_float32_matmul_precision('high')" in f.fix
    assert f.evidence.ops[0].shapes == "[[4096,4096],[4096,4096]]"
    assert "float" in (f.evidence.ops[0].dtypes or "")


def test_tiny_fp32_gemm_at_the_kernel_floor_saves_nothing(tmp_path: Path) -> None:
    t = gemm_trace(SGEMM, [[64, 64], [64, 64]], ["float", "float"], 2.0, repeat=50)
    result = findings(write_h200(t, tmp_path / "tiny.json"))
    f = by_id(result, "fp32_no_tensor_cores")
    assert f is None or f.saving_window_ns == 0


def test_bf16_tensor_core_gemm_is_not_an_fp32_finding(tmp_path: Path) -> None:
    t = gemm_trace(BF16_GEMM, [[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"], 300)
    result = findings(write_h200(t, tmp_path / "bf16.json"))
    assert by_id(result, "fp32_no_tensor_cores") is None
    assert by_id(result, "gemm_misaligned") is None


def test_fp64_gemm_is_found(tmp_path: Path) -> None:
    t = gemm_trace(
        "volta_dgemm_128x64_nn", [[2048, 2048], [2048, 2048]], ["double", "double"], 2_000
    )
    result = findings(write_h200(t, tmp_path / "fp64.json"))
    assert ids(result)[0] == "fp64_compute"
    assert by_id(result, "fp32_no_tensor_cores") is None


# (M, K, N) of the odd GEMM: a K or N off the multiple misaligns the operands' rows; M (the
# rows, batch x sequence) only rounds the tile count and is no misalignment.
@pytest.mark.parametrize(
    ("mkn", "found"),
    [
        ((4096, 4096, 4096), False),
        ((4096, 4096, 4095), True),
        ((4096, 4095, 4096), True),
        ((4095, 4096, 4096), False),
    ],
)
def test_gemm_misaligned_by_shape(tmp_path: Path, mkn: tuple[int, int, int], found: bool) -> None:
    m, k, n = mkn
    t = gemm_trace(
        BF16_GEMM, [[4096, 4096], [4096, 4096]], ["c10::BFloat16", "c10::BFloat16"], 200, repeat=3
    )
    ts = 1_000.0
    # The odd-shaped GEMM runs at half the aligned ones' rate.
    t.host(
        "aten::mm",
        ts - 10,
        8,
        args={
            "Input Dims": [[m, k], [k, n]],
            "Input type": ["c10::BFloat16", "c10::BFloat16"],
        },
    )
    t.gpu(BF16_GEMM, ts, 400, launch_ts=ts - 9)
    t.events[0]["dur"] = 1_500
    result = findings(write_h200(t, tmp_path / "mis.json"))
    f = by_id(result, "gemm_misaligned")
    assert (f is not None) is found
    if found:
        assert f.evidence.ops[0].shapes == f"[[{m},{k}],[{k},{n}]]"
        assert f.saving_window_ns == pytest.approx(
            200_000, rel=0.05
        )  # 400 µs down to the aligned 200 µs


@pytest.mark.parametrize(("repeat", "found"), [(7, False), (8, True)])
def test_sequential_small_gemms_needs_a_run_of_eight(
    tmp_path: Path, repeat: int, found: bool
) -> None:
    t = gemm_trace(SGEMM, [[32, 32], [32, 32]], ["float", "float"], 3.0, repeat=repeat)
    result = findings(write_h200(t, tmp_path / "seq.json"))
    f = by_id(result, "sequential_small_gemms")
    assert (f is not None) is found
    if found:
        assert f.evidence.ops[0].calls == 8
        assert "bmm" in f.fix


# -- copies ------------------------------------------------------------------------------------


def memcpy_trace(
    name: str,
    nbytes: int,
    dur_us: float,
    *,
    top_op: str = "aten::copy_",
    per_step: int = 1,
    steps: int = 1,
    lead_us: float = 0.0,
) -> HandMadeTrace:
    """Hand-made: ``steps`` steps, each ``lead_us`` of nothing on the GPU then ``per_step``
    copies launched from ``top_op``."""
    t = HandMadeTrace()
    ts = 20.0
    for s in range(steps):
        start = ts - 20
        ts += lead_us
        for _ in range(per_step):
            t.host(top_op, ts - 10, 9)
            t.gpu(
                name,
                ts,
                dur_us,
                cat="gpu_memcpy",
                launch_ts=ts - 8,
                launch_name="cudaMemcpyAsync",
                args={"bytes": nbytes, "memory bandwidth (GB/s)": nbytes / dur_us / 1e3},
            )
            ts += dur_us + 20
        t.host("aten::add", ts - 10, 3)
        t.gpu(ADD, ts, 500, launch_ts=ts - 8)
        ts += 520
        t.step(s + 1, start, ts - start)
    return t


def test_pageable_copies_are_priced_at_pinned_bandwidth(tmp_path: Path) -> None:
    t = memcpy_trace("Memcpy HtoD (Pageable -> Device)", 100_000_000, 20_000)
    f = by_id(findings(write_h200(t, tmp_path / "page.json")), "pageable_memcpy")
    assert f is not None and f.material
    assert f.saving_window_ns == pytest.approx(20_000_000 - 100_000_000 / 25.0, rel=0.01)
    pinned = memcpy_trace("Memcpy HtoD (Pinned -> Device)", 100_000_000, 4_000)
    assert by_id(findings(write_h200(pinned, tmp_path / "pin.json")), "pageable_memcpy") is None


@pytest.mark.parametrize(
    ("source", "found"), [(None, False), ("aten::randn", True), ("aten::arange", True)]
)
def test_cpu_tensor_creation_needs_a_cpu_made_tensor_per_step(
    tmp_path: Path, source: str | None, found: bool
) -> None:
    # Hand-made: each step copies a 4 MiB tensor with aten::to; with a source, the step first
    # builds it on the CPU (an op that launches nothing) while the GPU idles for 300 µs.
    t = memcpy_trace(
        "Memcpy HtoD (Pageable -> Device)",
        4 << 20,
        400.0,
        top_op="aten::to",
        steps=3,
        lead_us=300.0,
    )
    if source:
        for step in (e for e in list(t.events) if e["name"].startswith("ProfilerStep#")):
            t.host(source, step["ts"] + 1, 290)
    result = findings(write_h200(t, tmp_path / "cpu.json"))
    f = by_id(result, "cpu_tensor_creation")
    assert (f is not None) is found
    if found:
        assert f.evidence.ops[0].name == source
        # The copies' time is counted here, not again under pageable_memcpy.
        page = by_id(result, "pageable_memcpy")
        assert page is None or page.saving_window_ns < f.saving_window_ns


def test_torch_tensor_with_device_is_its_own_source(tmp_path: Path) -> None:
    t = memcpy_trace("Memcpy HtoD (Pageable -> Device)", 64, 2.0, top_op="aten::tensor", steps=3)
    assert (
        by_id(findings(write_h200(t, tmp_path / "tensor.json")), "cpu_tensor_creation") is not None
    )


def test_noncontiguous_copy_under_contiguous_only(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 1_000)
    t.host("aten::contiguous", 10, 30)
    t.host("aten::clone", 11, 28)
    t.host("aten::copy_", 12, 26)
    t.gpu("void at::native::elementwise_kernel<128, 2, copy>", 30, 200, launch_ts=14)
    t.host("aten::add", 300, 5)
    t.gpu(ADD, 310, 600, launch_ts=302)
    f = by_id(findings(write_h200(t, tmp_path / "nc.json")), "noncontiguous_copy")
    assert f is not None and f.evidence.ops[0].name == "aten::contiguous"
    assert f.saving_window_ns == 200_000


# -- training loop -------------------------------------------------------------------------------


@pytest.mark.parametrize(("kernels", "found"), [(3, False), (4, True)])
def test_unfused_optimizer_needs_more_than_three_kernels(
    tmp_path: Path, kernels: int, found: bool
) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    t.host("aten::add", 5, 3)
    t.gpu(ADD, 10, 1_000, launch_ts=6)
    t.host("Optimizer.step#AdamW.step", 1_000, 900, cat="user_annotation")
    ts = 1_100.0
    for _ in range(kernels):
        t.host("aten::_foreach_mul_", ts - 30, 20)
        t.gpu(
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<mul>",
            ts,
            100,
            launch_ts=ts - 25,
        )
        ts += 150
    result = findings(write_h200(t, tmp_path / "opt.json"))
    f = by_id(result, "unfused_optimizer")
    assert (f is not None) is found
    if found:
        assert "fused=True" in f.fix and "foreach" in f.title


@pytest.mark.parametrize(
    ("optimizer", "fix", "action"),
    [
        ("AdamW", "Construct the optimizer with fused=True", "the fused optimizer (fused=True)"),
        (
            "Lion",
            "Lion has no fused implementation in torch.optim",
            "batch or compile the optimizer step",
        ),
    ],
)
def test_unfused_optimizer_fix_is_what_torch_has_for_that_optimizer(
    tmp_path: Path, optimizer: str, fix: str, action: str
) -> None:
    from tests.unit.test_reported_numbers import optimizer_trace

    t = optimizer_trace(10_000_000)
    for e in t.events:
        if e["name"] == "Optimizer.step#AdamW.step":
            e["name"] = f"Optimizer.step#{optimizer}.step"
    f = by_id(findings(write_h200(t, tmp_path / "opt.json")), "unfused_optimizer")
    assert f is not None and f.fix.startswith(fix) and f.action == action


def test_a_per_parameter_optimizer_is_not_called_foreach(tmp_path: Path) -> None:
    # The for-loop implementation: per parameter, an update kernel and a cast of the updated
    # fp32 master weight into the bf16 model (a copy kernel, not a multi_tensor_apply one).
    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    t.host("aten::add", 5, 3)
    t.gpu(ADD, 10, 1_000, launch_ts=6)
    t.host("Optimizer.step#AdamW.step", 1_000, 900, cat="user_annotation")
    ts = 1_100.0
    for op, kernel in [
        (
            "aten::addcdiv_",
            "void at::native::vectorized_elementwise_kernel<4, at::native::addcdiv_cuda_kernel>",
        ),
        (
            "aten::copy_",
            "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda>",
        ),
    ] * 3:
        t.host(op, ts - 30, 20)
        t.gpu(kernel, ts, 100, launch_ts=ts - 25)
        ts += 120
    f = by_id(findings(write_h200(t, tmp_path / "forloop.json")), "unfused_optimizer")
    assert f is not None
    assert f.title == "The optimizer step runs as 6 kernels per step (one or more per parameter)"


def comm_trace(overlapped: bool, training: bool = True) -> HandMadeTrace:
    """Hand-made: a 1 ms all-reduce on its own stream, with or without compute beside it
    (after a backward op: DDP's gradient all-reduce; without it, a forward pass's)."""
    t = HandMadeTrace()
    t.step(1, 0, 3_000)
    t.host("MmBackward0" if training else "aten::mm", 5, 3)
    t.gpu(ADD, 10, 1_000, launch_ts=6)
    t.host("nccl:all_reduce", 1_000, 10)
    t.gpu(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        1_020 if not overlapped else 20,
        1_000 if not overlapped else 980,
        launch_ts=1_002 if not overlapped else 8,
        stream=20,
        args={"Collective name": "allreduce", "Group size": 2},
    )
    t.host("aten::mm", 2_030, 3)
    t.gpu(ADD, 2_040, 900, launch_ts=2_032)
    return t


def test_exposed_communication_only_when_not_overlapped(tmp_path: Path) -> None:
    exposed = by_id(
        findings(write_h200(comm_trace(False), tmp_path / "c1.json")), "exposed_communication"
    )
    assert exposed is not None and exposed.saving_window_ns == 1_000_000
    assert exposed.evidence.regions[0].name == "allreduce"
    assert "bucket_cap_mb" in exposed.fix
    # A forward-only program gets no DDP advice.
    forward = by_id(
        findings(write_h200(comm_trace(False, training=False), tmp_path / "c3.json")),
        "exposed_communication",
    )
    assert forward is not None and "bucket_cap_mb" not in forward.fix and "DDP" not in forward.fix
    assert "tensor-parallel" in forward.fix
    hidden = findings(write_h200(comm_trace(True), tmp_path / "c2.json"))
    assert by_id(hidden, "exposed_communication") is None


def test_allocator_churn_ignores_the_warmup_step(tmp_path: Path) -> None:
    def trace(in_second_step: bool) -> HandMadeTrace:
        t = HandMadeTrace()
        for s, start in ((1, 0.0), (2, 1_000.0)):
            t.step(s, start, 1_000)
            t.host("aten::add", start + 5, 3)
            t.gpu(ADD, start + 10, 900, launch_ts=start + 6)
        t.host("cudaMalloc", 1_500 if in_second_step else 500, 200, cat="cuda_runtime")
        return t

    assert (
        by_id(findings(write_h200(trace(False), tmp_path / "a1.json")), "allocator_churn") is None
    )
    assert (
        by_id(findings(write_h200(trace(True), tmp_path / "a2.json")), "allocator_churn")
        is not None
    )


def test_allocator_churn_leaves_out_the_warmup_step_by_time_not_by_number(tmp_path: Path) -> None:
    # Steps numbered out of time order (a second profiling session that restarted at #1): the
    # slow first step in time, #2, is the warm-up; the allocation in the later step #1 counts.
    t = HandMadeTrace()
    for s, start, busy in ((2, 0.0, 1_900.0), (1, 2_000.0, 900.0)):
        t.step(s, start, busy + 100)
        t.host("aten::add", start + 5, 3)
        t.gpu(ADD, start + 10, busy, launch_ts=start + 6)
    t.host("cudaMalloc", 2_950, 100, cat="cuda_runtime")
    result = findings(write_h200(t, tmp_path / "renumbered.json"))
    assert by_id(result, "allocator_churn") is not None


@pytest.mark.parametrize(("steps", "found"), [(1, False), (2, True)])
def test_allocator_churn_in_a_window_that_is_not_steady_state(
    tmp_path: Path, steps: int, found: bool
) -> None:
    # A window the assessment flags as not steady state (here its profiler overhead): a single
    # step of it is all warm-up, its allocations by design; with two, the second's count.
    t = HandMadeTrace()
    for s in range(1, steps + 1):
        start = 1_000.0 * (s - 1)
        t.step(s, start, 1_000)
        t.host("aten::add", start + 5, 3)
        t.gpu(ADD, start + 10, 900, launch_ts=start + 6)
    t.host("cudaMalloc", 1_000.0 * steps - 500, 200, cat="cuda_runtime")
    flag = Flag(
        id="profiler_overhead", title="profiler overhead", limits=True, evidence="hand-made"
    )
    result = findings(write_h200(t, tmp_path / "unsteady.json"), window=WindowResult(flags=(flag,)))
    assert (by_id(result, "allocator_churn") is not None) is found


def test_memory_pressure_from_reserved_share(tmp_path: Path) -> None:
    trace = write_h200(
        gemm_trace(BF16_GEMM, [[64, 64], [64, 64]], ["c10::BFloat16"] * 2, 50), tmp_path / "m.json"
    )
    total = 143 * 2**30

    def peaks(reserved: int) -> MemoryResult:
        return MemoryResult(
            peaks=pl.DataFrame(
                {"device": ["cuda:0"], "device_index": [0], "peak_reserved_bytes": [reserved]}
            )
        )

    below = findings(trace, memory=peaks(int(0.89 * total)))
    above = findings(trace, memory=peaks(int(0.91 * total)))
    assert by_id(below, "memory_pressure") is None
    f = by_id(above, "memory_pressure")
    assert f is not None and f.material and f.saving_pct == 0.0


# -- torch.compile ------------------------------------------------------------------------------


@pytest.mark.parametrize(("regions", "found"), [(1.0, False), (2.0, True)])
def test_graph_break_needs_several_regions_per_step(
    tmp_path: Path, regions: float, found: bool
) -> None:
    trace = write_h200(gap_trace(tmp_path, 500, "aten::nonzero", cat="cpu_op"), tmp_path / "g.json")
    ops = pl.DataFrame(
        {"name": ["aten::nonzero"], "calls_per_step": [1.0], "host_ns_per_step": [400_000.0]}
    )
    comp = CompileResult(
        steps=1, regions_per_step=regions, graph_break_ops=ops, cache_lookup_ns_per_step=50_000.0
    )
    assert (by_id(findings(trace, compile=comp), "graph_break") is not None) is found


def test_recompile_and_first_compile_are_told_apart(tmp_path: Path) -> None:
    trace = write_h200(
        gap_trace(tmp_path, 3_000, "OutputGraph.call_user_compiler"), tmp_path / "rc.json"
    )
    comp = CompileResult(steps=1, compiles_in_trace=2, recompiles_in_trace=1, compile_ns=2_000_000)
    result = findings(trace, compile=comp)
    first, again = by_id(result, "compile_in_window"), by_id(result, "recompile")
    assert first is not None and again is not None
    assert first.saving_window_ns == again.saving_window_ns == 1_000_000
    assert not first.per_step and first.saving_ns == first.saving_window_ns


# -- the result as a whole ------------------------------------------------------------------------


def test_missing_inputs_do_not_crash(tmp_path: Path) -> None:
    trace = write_h200(gap_trace(tmp_path, 500, "preprocess"), tmp_path / "none.json")
    result = find(FindingContext(trace=trace))
    assert not result.available
    bare = find(
        context(
            trace,
            bound=None,
            kernels=None,
            gaps=None,
            steps=None,
            memory=None,
            compile=None,
            ops=None,
        )
    )
    assert bare.available and bare.findings == ()


def test_claims_on_one_pool_never_exceed_it(tmp_path: Path) -> None:
    # Idle claimed by several findings never adds up to more than the idle time.
    trace = write_h200(sync_trace(2_000.0), tmp_path / "cap.json")
    ctx = context(trace)
    result = find(ctx)
    idle_ns = ctx.category_ns("idle")
    assert (
        sum(
            f.saving_window_ns for f in (*result.findings, *result.not_material) if f.pool == "idle"
        )
        <= idle_ns
    )
    assert result.total_saving_pct <= 100.0


def test_result_is_json_safe_and_tabular(tmp_path: Path) -> None:
    trace = write_h200(gap_trace(tmp_path, 500, "enumerate(DataLoader)#x"), tmp_path / "js.json")
    result = findings(trace)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["findings"][0]["id"] == "dataloader_stall"
    assert data["findings"][0]["evidence"]["rank"] is None
    table = result.to_polars()
    assert table.height == len(result.findings) + len(result.not_material)
    assert (
        table["saving_pct"].to_list()
        == sorted(table.filter(pl.col("material"))["saving_pct"].to_list(), reverse=True)
        + table.filter(~pl.col("material"))["saving_pct"].to_list()
    )
    assert MATERIALITY_PCT == 1.0


def drained_trace(after_return_us: float, sync_us: float = 600.0) -> HandMadeTrace:
    """Hand-made: .item() blocks the host ``sync_us`` until the GPU drains at 5 ms; the host
    then works ``after_return_us`` in ``prepare_batch`` (no ops) and 2 ms more before launching
    again, so the GPU idles from 5 ms (or later, when the host launched a kernel meanwhile)."""
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("aten::item", 5_010 - sync_us, sync_us)
    t.host("cudaStreamSynchronize", 5_011 - sync_us, sync_us - 4, cat="cuda_runtime")
    start = 5_012.0
    if after_return_us > 0:
        # A short kernel launched right after the return keeps the GPU busy until then.
        t.host("aten::add", 5_011, 3)
        t.gpu(ADD, 5_013, after_return_us, launch_ts=5_012)
        start = 5_013 + after_return_us
    t.host("prepare_batch", start, 2_000)
    t.host("aten::add", start + 2_002, 3)
    t.gpu(ADD, start + 2_010, 9_990 - start - 2_010, launch_ts=start + 2_003)
    return t


@pytest.mark.parametrize(("after_return_us", "opened"), [(0.0, True), (500.0, False)])
def test_host_sync_counts_the_gap_that_begins_when_the_sync_returns(
    tmp_path: Path, after_return_us: float, opened: bool
) -> None:
    result = findings(write_h200(drained_trace(after_return_us), tmp_path / "drain.json"))
    sync, host = by_id(result, "host_sync"), by_id(result, "host_bound")
    if opened:
        # The host works in prepare_batch with the GPU drained: without the sync it would have
        # done that work during the 600 µs it was blocked, the GPU still busy.
        assert sync is not None and sync.material
        assert sync.saving_window_ns == pytest.approx(600_000, abs=1_000)
        assert any(r.name == "prepare_batch" for r in sync.evidence.regions)
        assert host is None  # the gap is the sync's; host_bound does not claim it again
    else:
        # The long gap begins 500 µs after the return: the host work, not the sync, left the GPU
        # idle; only the 13 µs between the drain and the next kernel is the sync's.
        assert sync is None or sync.saving_window_ns <= 13_000
        assert host is not None and host.material and "prepare_batch" in host.title


def _item_blocks_600us() -> HandMadeTrace:
    """A step whose .item() blocks 600 µs until a 5 ms kernel drains, then a 20 µs kernel."""
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("aten::item", 4_410, 600)
    t.host("cudaStreamSynchronize", 4_411, 596, cat="cuda_runtime")
    t.host("aten::add", 5_011, 3)
    t.gpu(ADD, 5_013, 20, launch_ts=5_012)
    return t


def test_launch_overhead_after_a_sync_is_counted_once_under_host_sync(tmp_path: Path) -> None:
    # .item() blocks 600 µs until the GPU drains; 26 µs after it returns, one slow launch
    # (400 µs in cudaLaunchKernel) leaves the GPU idle 407 µs more. That gap is launch
    # overhead the sync opened: host_sync claims it, and launch_bound gives it up.
    t = _item_blocks_600us()
    t.host("aten::add", 5_034, 402)
    t.gpu(ADD, 5_440, 1_560, launch_ts=5_035, launch_dur=400)
    # and a slow launch with no sync before it: launch_bound's own 410 µs
    t.host("aten::add", 7_001, 402)
    t.gpu(ADD, 7_410, 2_580, launch_ts=7_002, launch_dur=400)
    result = findings(write_h200(t, tmp_path / "sync_launch.json"))
    sync, launch = by_id(result, "host_sync"), by_id(result, "launch_bound")
    assert sync is not None and sync.saving_window_ns == 420_000
    assert launch is not None and launch.saving_window_ns == 410_000
    assert launch.overlap == "0.41 ms of its idle time is counted under host_sync"


def test_data_loading_after_a_sync_is_shared_in_proportion_to_the_time_blocked(
    tmp_path: Path,
) -> None:
    # .item() blocks 600 µs; the gaps it opened hold 1.025 ms (13 µs draining, then 1.012 ms
    # of DataLoader), so the sync claims 600 µs, 58.5 % of each: 0.59 ms of the loading gap,
    # which dataloader_stall gives up.
    t = _item_blocks_600us()
    t.host(
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        5_034,
        1_000,
        cat="user_annotation",
    )
    t.host("aten::add", 6_040, 3)
    t.gpu(ADD, 6_045, 3_945, launch_ts=6_041)
    result = findings(write_h200(t, tmp_path / "sync_loading.json"))
    sync, loading = by_id(result, "host_sync"), by_id(result, "dataloader_stall")
    assert sync is not None and sync.saving_window_ns == 600_000
    assert loading is not None
    assert loading.overlap == "0.59 ms of its idle time is counted under host_sync"


def test_a_sync_that_blocks_zero_ns_saves_nothing(tmp_path: Path) -> None:
    # Hand-made: the GPU is already idle when a zero-length cudaStreamSynchronize is called.
    t = HandMadeTrace()
    t.step(1, 0, 10_000)
    t.host("aten::add", 1, 3)
    t.gpu(ADD, 10, 4_990, launch_ts=2)
    t.host("cudaStreamSynchronize", 5_010, 0, cat="cuda_runtime")
    t.host("prepare_batch", 5_011, 2_000)
    t.host("aten::add", 7_015, 3)
    t.gpu(ADD, 7_020, 2_970, launch_ts=7_016)
    result = findings(write_h200(t, tmp_path / "zero.json"))
    sync = by_id(result, "host_sync")
    assert sync is None or sync.saving_window_ns == 0
    assert by_id(result, "host_bound") is None  # the gap opened at the sync's return
