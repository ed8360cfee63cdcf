"""channels_last, input_channels_padding and zero_grad_memset: the recorded model pairs
(sample_traces/models, H100) and small hand-made traces (written by hand, not recorded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from traceinsight.analysis.findings.model import Finding
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

MODELS = Path(__file__).resolve().parents[2] / "sample_traces" / "models"
TIMINGS = {r["pair"]: r for r in json.loads((MODELS / "model_timings.json").read_text())}
# Pairs recorded on an H200 to isolate one change each, re-timed in 5 interleaved rounds.
RETIMED = {r["pair"]: r for r in json.loads((MODELS / "isolation_retimed.json").read_text())}
MATERIAL_PCT = 1.0
# zero_grad's recorded 16.8 % did not come back: re-timed on an H100 (the same step, 6
# interleaved rounds of 20 steps each after 3 warm-up steps), set_to_none=False vs True ran
# 48.49 vs 47.12 ms (2.8 %), with 36-54 ms between rounds of the same variant. The pair is
# host-bound and its recorded saving is inside that spread; the re-timed mean is the truth
# the finding is held to (docs/findings.md, predicted vs measured).
ZERO_GRAD_RETIMED_PCT = 2.8


def pair(name: str, side: str) -> Trace:
    return load(MODELS / f"model_{name}_{side}.json.gz", cache=False)


def within(found: Finding | None, measured_pct: float) -> bool:
    """The fix alone (what a pair that makes only this change measures) within 1.5x."""
    alone = None if found is None else (found.alone_pct if found.alone_pct is not None else found.saving_pct)
    return found is not None and alone is not None and measured_pct / 1.5 <= alone <= measured_pct * 1.5


# ---- the recorded pairs ------------------------------------------------------------------


def test_channels_last_pair() -> None:
    measured = float(TIMINGS["channels_last"]["saving_pct"])
    before = findings(pair("channels_last", "before"))
    f = by_id(before, "channels_last")
    assert within(f, measured), (f and f.alone_pct, measured)
    # device time it removes is far larger than the step saving: the step is host-bound
    figures = dict(f.evidence.figures)
    assert figures["device_saving_ns"] > 4 * figures["replayed_saving_ns"] > 0
    assert "torch.channels_last" in f.fix and "tensor cores" in f.fix
    after = by_id(findings(pair("channels_last", "after")), "channels_last")
    assert after is None or not after.material
    # What the report shows is the replayed saving: 4.8 %, above the 2.7 % of the recording
    # run and the 0.1 % of five re-timed rounds, whose spread (2.5-3.2 ms on a 33 ms step,
    # retimed_model_pairs.json) no saving under 10 % can be told from: it must stay under it.
    shown = by_id(findings(pair("channels_last", "before"), replay=True), "channels_last")
    assert shown is not None and shown.alone_pct is not None and shown.alone_pct < 10.0


def test_channels_last_pair_where_the_device_sets_the_step() -> None:
    # ResNet-50 bf16 at batch 256: the GPU's work sets the step, so what the layout change
    # removes from the device shows in the step (104.4 -> 54.3 ms, 48 %, CUDA events).
    measured = float(RETIMED["channels_last_256"]["saving_pct"])
    assert measured > 40
    shown = by_id(findings(pair("channels_last_256", "before"), replay=True), "channels_last")
    assert within(shown, measured), (shown and shown.saving_pct, measured)
    assert shown is not None and shown.confidence in ("high", "medium")
    after = by_id(findings(pair("channels_last_256", "after"), replay=True), "channels_last")
    assert after is None or not after.material


def test_the_layout_fix_leads_where_batch_norm_runs_do_not_claim_its_conversions() -> None:
    # The same trace: its batch-norm runs priced at their ends' bytes alone (and with cuDNN's
    # NCHW -> NHWC conversions counted as fusable) claimed 64 % for torch.compile, listed first,
    # and left the measured fix 2.7 %. A fused run is never faster than its longest kernel, and
    # a convolution's own conversions are not fusable: the layout change leads, at its alone
    # price, and the fusion it leaves is well under the whole step.
    before = findings(pair("channels_last_256", "before"), replay=True)
    assert before.findings[0].id == "channels_last", [(f.id, f.saving_pct) for f in before.findings]
    measured = float(RETIMED["channels_last_256"]["saving_pct"])
    assert measured / 1.5 <= before.findings[0].saving_pct <= measured * 1.5
    fusion = by_id(before, "unfused_elementwise")
    assert fusion is None or (fusion.alone_pct or 0.0) < 30.0


def test_zero_grad_pair() -> None:
    before = findings(pair("zero_grad", "before"))
    f = by_id(before, "zero_grad_memset")
    assert within(f, ZERO_GRAD_RETIMED_PCT), (f and f.alone_pct, ZERO_GRAD_RETIMED_PCT)
    assert "set_to_none=True" in f.fix
    # its launch idle is counted once: launch_bound gives that part up
    launch = by_id(before, "launch_bound")
    assert launch is not None and "counted under zero_grad_memset" in (launch.overlap or "")
    after = by_id(findings(pair("zero_grad", "after")), "zero_grad_memset")
    assert after is None
    # the replayed saving, which the report shows, is held to the same truth
    shown = by_id(findings(pair("zero_grad", "before"), replay=True), "zero_grad_memset")
    assert within(shown, ZERO_GRAD_RETIMED_PCT), (shown and shown.saving_pct, ZERO_GRAD_RETIMED_PCT)


def test_input_padding_pair_is_named_but_not_material_and_convolutions_are_not_gemms() -> None:
    measured = float(TIMINGS["input_padding"]["saving_pct"])
    before = findings(pair("input_padding", "before"))
    f = by_id(before, "input_channels_padding")
    assert f is not None and not f.material and f.saving_pct <= measured * 1.5
    assert "3 → 4" in f.fix
    assert by_id(before, "gemm_misaligned") is None
    after = findings(pair("input_padding", "after"))
    assert by_id(after, "input_channels_padding") is None
    assert by_id(after, "gemm_misaligned") is None


# ---- hand-made: zero_grad ----------------------------------------------------------------

FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def training_trace(*, region: bool, zero: bool, accumulate: bool, params: int = 60) -> HandMadeTrace:
    """Steps of: an optional zero_grad region (per-parameter zero_ → fill_ and its kernel),
    a launch-bound forward of small GEMMs, backward's AccumulateGrad (with an add_ when the
    gradient was kept). ``region=False`` zeroes outside any zero_grad region."""
    t = HandMadeTrace()
    ts = 0.0
    for n in range(1, 4):
        start = ts
        t.step(n, start, 1.0)  # duration fixed below
        ts += 5
        if region:
            t.host("Optimizer.zero_grad#SGD.zero_grad", ts, params * 12 + 5, cat="user_annotation")
        if zero:
            for _ in range(params):
                t.host("aten::zero_", ts + 1, 10)
                t.host("aten::fill_", ts + 2, 8)
                t.gpu(FILL, ts + 8, 1.5, launch_ts=ts + 3)
                ts += 12
        elif region:
            ts += params * 12
        ts += 10
        for _ in range(params):
            t.host("aten::mm", ts, 14, args={"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16"] * 2})
            t.gpu(GEMM, ts + 12, 3, launch_ts=ts + 2)
            ts += 16
        for _ in range(params):
            t.host("torch::autograd::AccumulateGrad", ts, 12)
            if accumulate:
                t.host("aten::add_", ts + 1, 10)
                t.gpu(ADD, ts + 9, 1.5, launch_ts=ts + 3)
            ts += 14
        ts += 20
        t.events[next(i for i, e in enumerate(t.events) if e["name"] == f"ProfilerStep#{n}")]["dur"] = ts - start
    return t


def test_zero_grad_in_place_is_named_and_nested_under_launch_bound(tmp_path: Path) -> None:
    r = findings(write_h200(training_trace(region=True, zero=True, accumulate=True), tmp_path / "zg.json"))
    f = by_id(r, "zero_grad_memset")
    assert f is not None and f.material
    figures = dict(f.evidence.figures)
    assert figures["zeroing_calls"] == 180 and figures["accumulate_adds"] == 180
    launch = by_id(r, "launch_bound")
    assert launch is not None and "counted under zero_grad_memset" in (launch.overlap or "")


def test_zeroing_outside_zero_grad_is_not_the_finding(tmp_path: Path) -> None:
    # zero_ per parameter, but not in Optimizer.zero_grad: the model's own business
    r = findings(write_h200(training_trace(region=False, zero=True, accumulate=True), tmp_path / "outside.json"))
    assert by_id(r, "zero_grad_memset") is None


def test_set_to_none_is_not_the_finding(tmp_path: Path) -> None:
    # set_to_none=True: the zero_grad region launches nothing, backward steals the gradients
    r = findings(write_h200(training_trace(region=True, zero=False, accumulate=False), tmp_path / "none.json"))
    assert by_id(r, "zero_grad_memset") is None


# ---- hand-made: convolutions -------------------------------------------------------------

NCHW_TO_NHWC = "void cudnn::engines_precompiled::nchwToNhwcKernel<{t}, {t}, float, false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, {t} const*, {t}*)"
NHWC_TO_NCHW = "void cudnn::engines_precompiled::nhwcToNchwKernel<{t}, {t}, float, true, false, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nhwc2nchw_params_t<float>, {t} const*, {t}*)"
CONV_BF16 = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_kernel__5x_cudnn"
CONV_FP32 = "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_kernel__5x_cudnn"
BN_NCHW = "void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float, float, true, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 4ul, at::RestrictPtrTraits, int>)"
BN_CL = "void at::native::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, 4>(c10::BFloat16 const*, c10::BFloat16 const*, float const*)"


def conv_trace(*, dtype: str, channels: int = 64, layout: bool = True, bn: str = BN_NCHW, steps: int = 3) -> HandMadeTrace:
    """Device-bound steps of convolution + batch norm; ``layout`` adds cuDNN's NCHW↔NHWC
    conversions around each convolution."""
    half = dtype != "float"
    aten = "c10::BFloat16" if half else "float"
    cu = "__nv_bfloat16" if half else "float"
    t = HandMadeTrace()
    ts = 0.0
    for n in range(1, steps + 1):
        start = ts
        t.step(n, ts, 1.0)
        gpu_ts = ts + 10
        for _ in range(20):
            t.host("aten::cudnn_convolution", ts, 8, args={"Input Dims": [[64, channels, 56, 56], [64, channels, 3, 3]], "Input type": [aten, aten]})
            if layout:
                t.gpu(NCHW_TO_NHWC.format(t=cu), gpu_ts, 40, launch_ts=ts + 1)
                gpu_ts += 41
            t.gpu(CONV_BF16 if half else CONV_FP32, gpu_ts, 200, launch_ts=ts + 3)
            gpu_ts += 201
            if layout:
                t.gpu(NHWC_TO_NCHW.format(t=cu), gpu_ts, 40, launch_ts=ts + 5)
                gpu_ts += 41
            t.host("aten::native_batch_norm", ts + 9, 4, args={"Input Dims": [[64, channels, 56, 56]], "Input type": [aten]})
            t.gpu(bn if half else bn.replace("c10::BFloat16", "float"), gpu_ts, 60, launch_ts=ts + 10)
            gpu_ts += 61
            ts += 15
        # the host's step ends with its last op; the next one starts after the GPU's work
        t.events[next(i for i, e in enumerate(t.events) if e["name"] == f"ProfilerStep#{n}")]["dur"] = ts - start
        ts = max(ts, gpu_ts) + 20
    return t


def test_nchw_bf16_convolutions_are_named(tmp_path: Path) -> None:
    f = by_id(findings(write_h200(conv_trace(dtype="bf16"), tmp_path / "nchw.json")), "channels_last")
    assert f is not None and f.material
    # device-bound: the layout conversions (80 of 362 µs) and part of batch norm come off
    assert 15 < f.saving_pct < 35


def test_fp32_nchw_convolutions_are_not_named(tmp_path: Path) -> None:
    r = findings(write_h200(conv_trace(dtype="float"), tmp_path / "fp32.json"))
    assert by_id(r, "channels_last") is None


def test_channels_last_already_is_not_named(tmp_path: Path) -> None:
    r = findings(write_h200(conv_trace(dtype="bf16", layout=False, bn=BN_CL), tmp_path / "cl.json"))
    assert by_id(r, "channels_last") is None


V100 = {"id": 0, "name": "Tesla V100-SXM2-16GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80, "totalGlobalMem": 16 * 2**30}


def test_no_layout_advice_without_tensor_cores_for_the_precision(tmp_path: Path) -> None:
    # a V100 has fp16 tensor cores, no bf16 ones: bf16 convolutions there are not this finding
    t = conv_trace(dtype="bf16")
    doc = {"schemaVersion": 1, "deviceProperties": [V100], "baseTimeNanoseconds": t.base_ns, "traceEvents": t.events}
    path = tmp_path / "v100.json"
    path.write_text(json.dumps(doc))
    assert by_id(findings(load(path, cache=False)), "channels_last") is None


def test_three_channel_convolutions(tmp_path: Path) -> None:
    bf16 = findings(write_h200(conv_trace(dtype="bf16", channels=3, layout=False, bn=BN_CL), tmp_path / "c3.json"))
    f = by_id(bf16, "input_channels_padding")
    assert f is not None and not f.material
    assert by_id(bf16, "gemm_misaligned") is None
    fp32 = findings(write_h200(conv_trace(dtype="float", channels=3, layout=False, bn=BN_CL), tmp_path / "c3f.json"))
    assert by_id(fp32, "input_channels_padding") is None


@pytest.mark.parametrize("name", ["mi300_resnet_act_checkpoint", "normalization_layers"])
def test_third_party_convolution_traces(name: str) -> None:
    path = Path(__file__).resolve().parents[3].joinpath("shared/third_party/tracelens") / f"{name}.json.gz"
    if not path.exists():
        pytest.skip("third-party traces not present")
    r = findings(load(path, cache=False))
    f = by_id(r, "channels_last")
    if name == "normalization_layers":
        # fp32 batch/layer/group norms, no 16-bit convolutions
        assert f is None
    else:
        # MIOpen on MI300X: bf16 NCHW convolutions behind batched_transpose conversions
        assert f is not None
        assert any("batched_transpose" in k.name for k in f.evidence.kernels)


def test_remove_spans_takes_the_device_work_they_launched(tmp_path: Path) -> None:
    from traceinsight.analysis.whatif.model import whatif
    from traceinsight.analysis.whatif.spans import RemoveSpans

    trace = write_h200(conv_trace(dtype="bf16"), tmp_path / "spans.json")
    k = trace.kernels
    conversions = k.filter(k["name"].cast(str).str.contains("nchwToNhwc|nhwcToNchw"))
    launches = tuple(int(i) for i in conversions["launch_id"].drop_nulls().to_list())
    per_step_ns = int(conversions["dur_ns"].sum()) // 3
    # device-bound steps: removing the launches takes their kernels' time off each step
    saved = whatif(trace, (RemoveSpans(launches),)).saving_ns
    assert 0.8 * per_step_ns <= saved <= 1.05 * per_step_ns, (saved, per_step_ns)
    assert whatif(trace, (RemoveSpans(()),)).saving_ns == 0
