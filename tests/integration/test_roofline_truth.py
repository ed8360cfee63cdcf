"""Truth rules of the roofline: peaks by path, ops by dtype, element sizes, aliasing, shares
above 100 %, unknown peaks, device matching, step windows; FLOP counts against flop_counter.

Hand-made traces here are faithful reductions of real ones (named in each test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.cost.args import OpArgs
from traceinsight.analysis.cost.matmul import attention_cost, mm_cost
from traceinsight.analysis.cost.model import kernel_costs, op_cost
from traceinsight.analysis.device.peaks import lookup, match_device
from traceinsight.analysis.runner import run_one
from traceinsight.trace.loader import load

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
F32, F64, BF16 = "float", "double", "c10::BFloat16"


def _bound(path: Path) -> Any:
    return run_one(load(path, cache=False), "bound", AnalysisConfig())


def _one_op_trace(
    tmp: Path, name: str, dims: list[Any], types: list[str], kernel_name: str, dur_us: float,
    *, device_props: list[dict[str, Any]] | None = None, pid: int = 0,
) -> Path:
    """One op launching one kernel (a reduced real trace: the op/launch/kernel triple)."""
    args = {"External id": 1, "Input Dims": dims, "Input type": types, "Concrete Inputs": [""] * len(dims)}
    k = kernel(kernel_name, 120.0, dur_us, 1, device=pid)
    k["pid"] = pid
    events = [
        op(name, 100.0, 30.0, args=args),
        launch("cudaLaunchKernel", 105.0, 3.0, 1),
        k,
    ]
    props = device_props if device_props is not None else [{"id": 0, "name": "NVIDIA H200", "numSms": 132}]
    return write_trace(tmp / "t.json", events, deviceProperties=props)


# ---- 1. peaks by path ---------------------------------------------------------------------


def test_fp64_gemm_on_tensor_cores_is_costed_at_the_fp64_tensor_peak() -> None:
    # Real trace: an fp64 GEMM on an H200 runs sm90_xmma_gemm_f64f64 (DMMA). At the 34 TFLOP/s
    # vector peak it read 166-174 %; at the 67 TFLOP/s tensor peak it is under 100 %.
    b = _bound(SAMPLES / "fix_fp64_before.json.gz")
    gemm = b.kernels.filter(pl.col("name").str.starts_with("sm90_xmma_gemm_f64f64"))
    assert gemm.height > 0
    assert set(gemm["dtype_class"].to_list()) == {"fp64_tc"}
    assert gemm["pct_of_roofline"].max() < 100.0
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-40GB", "AMD Instinct MI300X"):
        peaks = lookup(name)
        assert peaks is not None and peaks.peak_tflops("fp64_tc") == pytest.approx(2 * peaks.peak_tflops("fp64"), rel=0.02)  # type: ignore[operator]
    v100 = lookup("Tesla V100-SXM2-16GB")
    assert v100 is not None and v100.peak_tflops("fp64_tc") == v100.peak_tflops("fp64")


# ---- 2. ops by dtype ----------------------------------------------------------------------


def test_ops_of_one_shape_and_different_dtypes_are_separate_rows() -> None:
    # Real trace: fix_churn_before has aten::mul [[512,2048],...] with float and double operands.
    b = _bound(SAMPLES / "fix_churn_before.json.gz")
    mul = b.ops.filter(pl.col("name") == "aten::mul")
    assert mul.height >= 2
    assert mul["dtypes"].n_unique() == mul.height
    assert mul.select("shapes", "dtypes", "device").is_duplicated().sum() == 0


# ---- 3. element sizes of TensorLists ------------------------------------------------------


def test_cat_of_bf16_tensors_takes_its_element_size_from_the_kernel(tmp_path: Path) -> None:
    # Reduced from a real trace: aten::cat of two bf16 [1024,1024] tensors; Kineto types the list
    # just "TensorList", the kernel name says OpaqueType<2u>.
    path = _one_op_trace(
        tmp_path, "aten::cat", [[[1024, 1024], [1024, 1024]], []], ["TensorList", "Scalar"],
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<at::native::(anonymous "
        "namespace)::OpaqueType<2u>, unsigned int, 2, 64, 64>(int)", 10.0,
    )
    costs = kernel_costs(load(path, cache=False))
    assert costs["bytes"].to_list() == [2 * 2 * 1024 * 1024 * 2]


# ---- 4. aliased inputs --------------------------------------------------------------------


def test_foreach_addcmul_reads_the_grad_list_once_on_a_real_trace() -> None:
    # Real trace: torch.optim.Adam's _foreach_addcmul_(exp_avg_sq, grads, grads) read 103-107 %.
    b = _bound(SAMPLES / "amp_off.json.gz")
    row = b.ops.filter(pl.col("name") == "aten::_foreach_addcmul_")
    assert row.height == 1
    assert row["pct_of_roofline"][0] < 100.0


# ---- 5, 11. shares above 100 % carry a reason ---------------------------------------------


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.json.gz")), ids=lambda p: p.name)
def test_no_share_above_100_percent_without_a_reason(path: Path) -> None:
    b = _bound(path)
    for table in (b.regions, b.ops, b.kernels):
        over = table.filter((pl.col("pct_of_roofline") > 100.0) & pl.col("above_peak_reason").is_null())
        assert over.height == 0, over.select("name", "pct_of_roofline").rows()[:3]


def test_cache_resident_op_above_hbm_says_so() -> None:
    # Real trace: fix_churn_before's small fp32 aten::mul reads above the HBM roofline (L2-resident).
    b = _bound(SAMPLES / "fix_churn_before.json.gz")
    over = b.ops.filter(pl.col("pct_of_roofline") > 100.0)
    assert over.height > 0
    assert all(r.startswith("cache-resident") for r in over["above_peak_reason"].to_list())
    assert any("above 100% of roofline" in n for n in b.notes)


# ---- 7. no peaks --------------------------------------------------------------------------


def test_unknown_device_gives_null_shares_not_zero(tmp_path: Path) -> None:
    path = _one_op_trace(
        tmp_path, "aten::mm", [[256, 256], [256, 256]], [F32, F32], "ampere_sgemm_128x64_nn", 50.0,
        device_props=[{"id": 0, "name": "Hand-made accelerator 9000"}],
    )
    b = _bound(path)
    assert not b.roofline_available
    for table in (b.regions, b.ops, b.kernels):
        assert table["pct_of_roofline"].null_count() == table.height
        assert table.filter(pl.col("reason").str.contains("0% of roofline")).height == 0
    # Before: a family guess ("compute", from the sgemm kernel name). After: "unknown", with the
    # missing device peaks named, in every table.
    for table in (b.ops, b.kernels):
        assert table["label"].to_list() == ["unknown"]
        assert "device peaks" in table["reason"].item() and "missing" in table["reason"].item()
    busy = b.regions.filter(pl.col("kind") == "op").row(0, named=True)
    assert busy["label"] == "unknown" and "device peaks" in busy["reason"]
    assert b.regions.filter(pl.col("label").is_in(["compute", "memory"])).height == 0


# ---- 8. ROCm device ids -------------------------------------------------------------------


def test_rocm_device_listed_as_id_0_while_kernels_run_on_pid_2(tmp_path: Path) -> None:
    # Reduced from an MI300X/SGLang trace: deviceProperties has id 0, kernels carry pid 2.
    props = [{"id": 0, "name": "AMD Instinct MI300X", "gcnArchName": "gfx942:sramecc+:xnack-", "numSms": 304}]
    path = _one_op_trace(tmp_path, "aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16],
                         "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64_MI16x16x1", 200.0, device_props=props, pid=2)
    b = _bound(path)
    assert b.roofline_available
    assert b.peaks is not None and b.peaks["key"] == "mi300x" and b.peaks["matched_by"] == "position"


def test_generic_amd_name_is_inferred_from_gcn_arch(tmp_path: Path) -> None:
    # Reduced from an MI250 trace: ROCm names the GCD "AMD Radeon Graphics".
    props = [{"id": 0, "name": "AMD Radeon Graphics", "gcnArchName": "gfx90a:sramecc+:xnack-", "numSms": 104}]
    path = _one_op_trace(tmp_path, "aten::mm", [[1024, 1024], [1024, 1024]], [F32, F32],
                         "Cijk_Ailk_Bljk_SB_MT64x64x16", 100.0, device_props=props)
    b = _bound(path)
    assert b.peaks is not None and b.peaks["key"] == "mi250"
    assert any("inferred" in n for n in b.notes)


def test_match_device_by_id_pid_position_and_only_entry() -> None:
    class Dev:
        def __init__(self, id: int, name: str, raw: dict[str, Any] | None = None) -> None:
            self.id, self.name, self.raw = id, name, raw or {}

    a, b = Dev(0, "X"), Dev(1, "Y")
    assert match_device(1, [a, b], [0, 1]) == (b, "id")
    assert match_device(5, [a, b], [4, 5]) == (b, "position")
    assert match_device(7, [Dev(0, "X", {"pid": 7})], [7]) [1] == "pid"
    assert match_device(9, [a], [3, 9]) == (a, "only entry")
    assert match_device(9, [a, b], [1, 2, 9]) == (None, None)


# ---- 9. steps' device windows -------------------------------------------------------------


def test_bound_step_windows_are_the_steps_device_windows() -> None:
    # Real trace: train_eager's steps read 25-45 ms in Bound against 14.3 ms in Steps.
    from traceinsight.analysis.lib.timeline import device_step_spans

    trace = load(SAMPLES / "train_eager.json.gz")
    b = run_one(trace, "bound", AnalysisConfig())
    steps = b.regions.filter(pl.col("kind") == "step").sort("start_ns")
    spans = device_step_spans(trace).sort("device_start_ns")
    assert steps["dur_ns"].to_list() == spans["device_dur_ns"].to_list()
    assert (steps["busy_ns"] <= steps["dur_ns"]).all()


# ---- 10. formulas that the next bug would break -------------------------------------------


def _args(dims: list[Any], types: list[str], concrete: list[str] | None = None) -> OpArgs:
    return OpArgs(dims=dims, types=types, concrete=concrete or [""] * len(dims))


def test_cross_attention_uses_the_key_length() -> None:
    q, kv = [2, 4, 128, 64], [2, 4, 512, 64]
    c = attention_cost("aten::_scaled_dot_product_flash_attention", _args([q, kv, kv], [BF16] * 3))
    assert c is not None and c.flops == 4 * 2 * 4 * 128 * 512 * 64


def test_batched_second_operand_sets_the_batch() -> None:
    c = mm_cost(_args([[128, 64], [8, 64, 32]], [F32, F32]))
    assert c is not None and c.flops == 2 * 8 * 128 * 64 * 32


def test_roofline_share_is_the_max_of_compute_and_memory_time(tmp_path: Path) -> None:
    # Hand-made: one fp32 SIMT mm [256,256]x[256,256] on an H200 (67 TFLOP/s, 4.8 TB/s).
    path = _one_op_trace(tmp_path, "aten::mm", [[256, 256], [256, 256]], [F32, F32], "ampere_sgemm_128x64_nn", 1.0)
    b = _bound(path)
    row = b.ops.row(0, named=True)
    flops, nbytes = 2 * 256**3, 3 * 256 * 256 * 4
    t_compute, t_memory = flops / 67e3, nbytes / 4.8e3  # ns
    assert row["pct_of_roofline"] == pytest.approx(100 * max(t_compute, t_memory) / 1000, rel=1e-9)
    assert row["pct_of_roofline"] == pytest.approx(50.08124, rel=1e-5)


# ---- flop_counter cross-check -------------------------------------------------------------

torch = pytest.importorskip("torch")
fc = pytest.importorskip("torch.utils.flop_counter")


def _ours(name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None) -> float:
    c = op_cost(name, json.dumps(dims), json.dumps(types), json.dumps(concrete or [""] * len(dims)))
    assert c is not None
    return c.flops


def test_matmuls_match_flop_counter() -> None:
    assert _ours("aten::mm", [[64, 32], [32, 16]], [F32] * 2) == fc.mm_flop([64, 32], [32, 16])
    assert _ours("aten::addmm", [[16], [64, 32], [32, 16]], [F32] * 3) == fc.addmm_flop([16], [64, 32], [32, 16])
    assert _ours("aten::bmm", [[4, 64, 32], [4, 32, 16]], [F32] * 2) == fc.bmm_flop([4, 64, 32], [4, 32, 16])
    assert _ours("aten::baddbmm", [[4, 64, 16], [4, 64, 32], [4, 32, 16]], [F32] * 3) == fc.baddbmm_flop(
        [4, 64, 16], [4, 64, 32], [4, 32, 16]
    )


def test_convolution_and_backward_match_flop_counter() -> None:
    x, w = [2, 3, 16, 16], [8, 3, 3, 3]
    out = [2, 8, 14, 14]
    conv = _ours("aten::convolution", [x, w, [8], [], [], [], [], [], []],
                 [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                 ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"])
    assert conv == fc.conv_flop_count(x, w, out, transposed=False)
    bwd = _ours("aten::convolution_backward", [out, x, w, [], [], [], [], [], [], [], []],
                [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar", "BoolList"],
                ["", "", "", "[8]", "[1, 1]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"])
    with fc.FlopCounterMode(display=False) as counter:
        torch.ops.aten.convolution_backward(
            torch.empty(out, device="meta"), torch.empty(x, device="meta"), torch.empty(w, device="meta"),
            [8], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False],
        )
    assert bwd == counter.get_total_flops()


def test_attention_forward_and_backward_match_flop_counter() -> None:
    q, kv = [2, 4, 128, 64], [2, 4, 256, 64]
    fwd = _ours("aten::_scaled_dot_product_flash_attention", [q, kv, kv], [BF16] * 3)
    assert fwd == fc.sdpa_flop_count(q, kv, kv)
    dims = [q, q, kv, kv, q, [2, 4, 128], [], [], [], [], [], [], [], [], []]
    types = [BF16] * 5 + [F32] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", ""]
    concrete = [""] * 11 + ["False"] + [""] * 3
    bwd = _ours("aten::_scaled_dot_product_flash_attention_backward", dims, types, concrete)
    assert bwd == fc.sdpa_backward_flop_count(q, q, kv, kv)


# ---- 6. first calls -----------------------------------------------------------------------


def test_first_call_far_above_steady_state_is_set_apart(tmp_path: Path) -> None:
    # Reduced from a real trace: the first aten::mm took 75 ms (cuBLAS handle creation), the
    # next ones 40 µs each.
    args = {"Input Dims": [[64, 64], [64, 64]], "Input type": [F32, F32], "Concrete Inputs": ["", ""]}
    events: list[dict[str, Any]] = []
    ts = 100.0
    for i, dur in enumerate([75_000.0, 40.0, 41.0, 39.0]):
        events += [op("aten::mm", ts, dur, args=args | {"External id": i + 1}),
                   launch("cudaLaunchKernel", ts + dur - 10, 3.0, i + 1),
                   kernel("ampere_sgemm_32x32_nn", ts + dur, 5.0, i + 1)]
        ts += dur + 20
    path = write_trace(tmp_path / "t.json", events, deviceProperties=[{"id": 0, "name": "NVIDIA H200"}])
    b = _bound(path)
    assert [r["name"] for r in b.first_calls] == ["aten::mm"]
    assert b.first_calls[0]["first_ns"] == 75_000_000 and b.first_calls[0]["calls"] == 4
    assert any("first call" in n for n in b.notes)


def test_a_first_call_alone_does_not_make_a_region_overhead_bound(tmp_path: Path) -> None:
    # Hand-made: the 75 ms first aten::mm (cuBLAS handle creation) of the reduced trace above,
    # then a steady state that keeps the GPU busy (2 ms kernels launched 40 µs apart).
    args = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": [F32, F32], "Concrete Inputs": ["", ""]}
    events: list[dict[str, Any]] = []
    ts, gpu = 100.0, 0.0
    for i, dur in enumerate([75_000.0, 40.0, 41.0, 39.0]):
        start = max(ts + dur, gpu)
        events += [op("aten::mm", ts, dur, args=args | {"External id": i + 1}),
                   launch("cudaLaunchKernel", ts + dur - 10, 3.0, i + 1),
                   kernel("ampere_sgemm_128x64_nn", start, 2_000.0, i + 1)]
        ts, gpu = ts + dur + 5, start + 2_000.0
    path = write_trace(tmp_path / "t.json", events, deviceProperties=[{"id": 0, "name": "NVIDIA H200"}])
    trace = load(path, cache=False)
    whole = run_one(trace, "bound", AnalysisConfig()).regions.filter(pl.col("kind") == "trace").row(0, named=True)
    # Before: the 75 ms idle gap read as launch overhead and made the trace overhead-bound.
    # After: it is set apart, and the steady state (GPU busy) is judged on its roofline.
    assert whole["label"] == "compute", whole["reason"]
    assert "one-time first call left out" in whole["reason"]
    assert whole["idle_ns"] >= 75_000_000  # the window and its idle are still reported as measured
    # Without the first call the same trace is compute-bound too (the label is the steady state's).
    steady = [e for e in events if e.get("args", {}).get("External id") != 1]
    whole2 = _bound(write_trace(tmp_path / "s.json", steady, deviceProperties=[{"id": 0, "name": "NVIDIA H200"}]))
    assert whole2.regions.filter(pl.col("kind") == "trace")["label"].item() == "compute"
