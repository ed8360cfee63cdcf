"""eager_attention: attention written out as matmul → softmax → matmul.

The recorded GPT-2 pair (eager vs sdpa, measured step times) is the ground truth; the edge
cases are hand-made traces (not recorded by a profiler); the third-party traces run fused
attention and must not be named.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.analyses import analysed
from tests.findings_helpers import by_id, context, findings, write_h200
from tests.handmade import HandMadeTrace, kernel, launch, op, write_trace
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings import DETECTORS, FindingsResult
from traceinsight.analysis.findings.detect.attention import (
    FUSED_ATTENTION_EFFICIENCY,
    MAX_KERNELS_BETWEEN,
    attention_fix,
    detect_eager_attention,
)
from traceinsight.analysis.findings.price import replayed
from traceinsight.analysis.whatif.fuse_kernels import FuseKernels
from traceinsight.analysis.whatif.model import whatif
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "sample_traces" / "models"
TRACELENS = ROOT.parent / "shared" / "third_party" / "tracelens"

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)"
LOG_SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)"
SCALE = "void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::DivFunctor<c10::BFloat16> >, std::array<char*, 2ul> >(int)"
FLASH = "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>, false, false, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)"
BF16 = "c10::BFloat16"


# ---- the recorded pair -------------------------------------------------------------------


@functools.cache
def _model(name: str) -> FindingsResult:
    result = analysed(MODELS / f"model_{name}.json.gz").sections["findings"]  # the run's one analysis
    assert isinstance(result, FindingsResult)
    return result


def _measured_pct(pair: str) -> float:
    rows = json.loads((MODELS / "model_timings.json").read_text())
    return float(next(r for r in rows if r["pair"] == pair)["saving_pct"])


def test_gpt2_eager_attention_is_named_with_the_measured_saving() -> None:
    measured = _measured_pct("attention")  # 66.371 → 45.403 ms: 31.6 %
    f = by_id(_model("attention_before"), "eager_attention")
    assert f is not None and f.material and f.confidence == "high"
    # The device-time estimate (the kernels of the subgraph minus one fused kernel) is within
    # 1.5x of the measured saving. The replayed saving, which is what the report shows, reads
    # lower (17.4 % against 31.3-31.6 % measured): the change measured also removed a per-step
    # blocking copy, which host_sync reports (see the test below). Pinned here so that a change
    # of either shows.
    assert f.claim_pct is not None and measured / 1.5 <= f.claim_pct <= measured * 1.5
    assert measured / 2 <= f.saving_pct <= measured
    assert "scaled_dot_product_attention" in f.fix and 'attn_implementation="sdpa"' in f.fix
    # evidence: the score-shaped ops with their shapes, and the share of GPU time
    assert any(o.shapes and "1024,1024" in o.shapes for o in f.evidence.ops)
    share = dict(f.evidence.figures)["share_of_kernel_time_pct"]
    assert 20 < share < 40


def test_the_switch_to_sdpa_is_two_findings_replayed_together() -> None:
    # Hugging Face's eager path builds its attention mask with a blocking host-to-device copy
    # (an aten::to whose cudaStreamSynchronize waits for the previous step's work), once per
    # step; the sdpa path passes is_causal and builds none. The measured change is therefore the
    # fusion (eager_attention) and the removed sync (host_sync): replayed together, they are
    # within 1.5x of it, while the fusion alone is not.
    def syncs(name: str) -> int:
        ev = load(MODELS / f"model_{name}.json.gz", cache=False).events
        return ev.filter(pl.col("name").cast(pl.String) == "cudaStreamSynchronize").height

    assert syncs("attention_before") >= 4 and syncs("attention_after") == 0
    ctx = context(load(MODELS / "model_attention_before.json.gz", cache=False))
    est = {e.finding.id: e for e in (d(ctx) for d in DETECTORS) if e is not None}
    rep, note = replayed.check(ctx)
    assert rep is not None, note

    def saving(*ids: str) -> float:
        after = rep.after_ns(tuple(t for i in ids for t in est[i].transforms))
        return 100.0 * (rep.before_ns - after) / rep.before_ns

    measured = _measured_pct("attention")
    assert measured / 1.5 <= saving("eager_attention", "host_sync") <= measured * 1.5
    assert saving("eager_attention") < measured / 1.5


def test_the_fusion_alone_is_what_eager_attention_replays() -> None:
    # Recorded on an H200 to isolate the fusion: "after" is sdpa with a stream sync where the
    # eager path's mask copy blocks (before the first block), so the pair differs only by the
    # attention kernels. Five interleaved rounds: 56.67 -> 42.18 ms (25.6 %).
    rows = json.loads((MODELS / "isolation_retimed.json").read_text())
    measured = float(next(r for r in rows if r["pair"] == "attention_fusion")["saving_pct"])
    for side in ("before", "after"):
        ev = load(MODELS / f"model_attention_fusion_{side}.json.gz", cache=False).events
        assert ev.filter(pl.col("name").cast(pl.String).str.ends_with("Synchronize")).height >= 4
    before = _model("attention_fusion_before")
    f = by_id(before, "eager_attention")
    assert f is not None and f.material and f.alone_pct is not None
    assert measured / 1.5 <= f.alone_pct <= measured * 1.5, (f.alone_pct, measured)
    after = by_id(_model("attention_fusion_after"), "eager_attention")
    assert after is None or not after.material


def test_gpt2_eager_attention_carries_its_fix_as_a_fusion() -> None:
    trace = load(MODELS / "model_attention_before.json.gz", cache=False)
    ctx = context(trace)
    est = detect_eager_attention(ctx)
    assert est is not None
    (fuse,) = est.transforms
    assert isinstance(fuse, FuseKernels)
    chosen = trace.kernels.filter(pl.col("id").is_in(list(fuse.kernel_ids)))
    assert int(chosen["dur_ns"].sum()) == dict(est.finding.evidence.figures)["attention_subgraph_ns"]
    assert fuse.fused_ns == dict(est.finding.evidence.figures)["fused_estimate_ns"]
    # 6 layers x 4 steps of [96 x 1024 x 1024] scores, head dim 64: forward 4·BH·S²·D, backward
    # 2.5x that, at the fused kernels' share of the bf16 peak (FLOPs outweigh the bytes here)
    peak = ctx.peak_tflops("bf16")
    assert peak is not None
    flops = 4 * 96 * 1024 * 1024 * 64 * (24 + 2.5 * 24)
    assert fuse.fused_ns == pytest.approx(flops / (peak * FUSED_ATTENTION_EFFICIENCY * 1e12) * 1e9, rel=0.01)
    # the host ops that launched only attention kernels shrink to one fused call per attention
    assert fuse.host_op_ids and 0 < fuse.host_factor < 0.5


def test_gpt2_sdpa_is_not_named() -> None:
    result = _model("attention_after")
    f = by_id(result, "eager_attention")
    assert f is None or not f.material


def test_gemm_misaligned_on_gpt2_blames_the_vocabulary_not_the_attention_matmuls() -> None:
    f = by_id(_model("attention_before"), "gemm_misaligned")
    assert f is not None
    assert all(o.name != "aten::bmm" for o in f.evidence.ops)
    assert "vocab_size to a multiple of 64, 50257 → 50304" in f.fix


# ---- hand-made edge cases ----------------------------------------------------------------


def attention_trace(
    *,
    shapes: bool = True,
    seq: int = 512,
    head_dim: int = 64,
    layers: int = 4,
    steps: int = 2,
    between: tuple[str, ...] = (SCALE, SOFTMAX),
    second_gemm: bool = True,
    extra: tuple[str, ...] = (),
) -> HandMadeTrace:
    """Per step and layer: bmm (Q·Kᵀ), the kernels ``between`` (scale, softmax), bmm (P·V) (or
    without ``second_gemm`` more elementwise kernels than one attention has), with
    their aten ops and shapes when ``shapes``; ``extra`` kernels once per step (e.g. a fused one)."""
    bh = 8
    score = [1, bh, seq, seq]
    ops = {
        SCALE: ("aten::div", [score, []]),
        SOFTMAX: ("aten::_softmax", [score, [], []]),
        LOG_SOFTMAX: ("aten::_log_softmax", [[seq, 50257], [], []]),
        FLASH: ("aten::_flash_attention_forward", [[1, seq, bh, head_dim]] * 3),
    }
    t = HandMadeTrace()
    ts = 10.0
    for step in range(steps):
        start = ts
        ts += 10
        chain: list[tuple[str, str, list[Any]]] = [(GEMM, "aten::bmm", [[bh, seq, head_dim], [bh, head_dim, seq]])]
        chain += [(k, *ops[k]) for k in between]
        if second_gemm:
            chain.append((GEMM, "aten::bmm", [[bh, seq, seq], [bh, seq, head_dim]]))
        else:  # a softmax followed by elementwise work (a router, a classifier head), then the next layer
            chain += [(SCALE, "aten::mul", [score, score])] * (MAX_KERNELS_BETWEEN + 1)
        for _ in range(layers):
            for name, aten, dims in chain:
                if shapes:
                    t.host(aten, ts, 8, args={"Input Dims": dims, "Input type": [BF16] * len(dims)})
                t.gpu(name, ts + 10, 100, launch_ts=ts + 1)
                ts += 120
        for name in extra:
            if shapes:
                t.host(ops[name][0], ts, 8, args={"Input Dims": ops[name][1], "Input type": [BF16] * 3})
            t.gpu(name, ts + 10, 100, launch_ts=ts + 1)
            ts += 120
        t.step(step + 1, start, ts - start)
        ts += 10
    return t


def _eager(trace: Trace) -> Any:
    return by_id(findings(trace), "eager_attention")


def test_written_out_attention_with_shapes_is_named_with_sdpa_for_this_device(tmp_path: Path) -> None:
    f = _eager(write_h200(attention_trace(), tmp_path / "shapes.json"))
    assert f is not None and f.material and f.confidence == "high"
    assert "cudnn/flash" in f.fix and "bf16" in f.fix
    # 4 layers x 2 steps of 4 kernels, 100 µs each; the fused kernel is ~1 µs per call
    figures = dict(f.evidence.figures)
    assert figures["attention_subgraph_ns"] == 2 * 4 * 4 * 100_000
    assert 0 < figures["fused_estimate_ns"] < 2 * 4 * 5_000
    assert {o.name for o in f.evidence.ops} >= {"aten::bmm", "aten::_softmax", "aten::div"}


def test_written_out_attention_without_shapes_is_found_from_its_kernels(tmp_path: Path) -> None:
    f = _eager(write_h200(attention_trace(shapes=False), tmp_path / "kernels.json"))
    assert f is not None and f.confidence == "low"
    # without shapes the fused kernel is taken to cost what the two GEMMs cost: the saving is
    # the scale and softmax kernels
    assert dict(f.evidence.figures)["fused_estimate_ns"] == 2 * 4 * 2 * 100_000


def test_fused_attention_in_the_trace_means_no_finding_from_kernels(tmp_path: Path) -> None:
    trace = write_h200(attention_trace(shapes=False, extra=(FLASH,)), tmp_path / "flash.json")
    assert _eager(trace) is None


def test_softmax_inside_sdpa_is_not_the_users_attention(tmp_path: Path) -> None:
    t = attention_trace()
    # every op of the pattern inside an aten::scaled_dot_product_attention span (its math path)
    first = min(e["ts"] for e in t.events if e.get("cat") == "cpu_op")
    last = max(e["ts"] + e["dur"] for e in t.events if e.get("cat") == "cpu_op")
    t.host("aten::scaled_dot_product_attention", first - 1, last - first + 2)
    assert _eager(write_h200(t, tmp_path / "math.json")) is None


@pytest.mark.parametrize("shapes", [True, False])
def test_softmax_not_between_two_matmuls_is_not_attention(tmp_path: Path, shapes: bool) -> None:
    trace = write_h200(attention_trace(shapes=shapes, second_gemm=False), tmp_path / f"head_{shapes}.json")
    assert _eager(trace) is None


def test_log_softmax_of_a_loss_between_gemms_is_not_attention(tmp_path: Path) -> None:
    trace = write_h200(attention_trace(shapes=False, between=(LOG_SOFTMAX,)), tmp_path / "loss.json")
    assert _eager(trace) is None


def test_misaligned_attention_matmuls_are_left_to_eager_attention(tmp_path: Path) -> None:
    # ViT: 197 tokens; the Q·Kᵀ and P·V matmuls have the sequence as a leading dimension
    result = findings(write_h200(attention_trace(seq=197), tmp_path / "vit.json"))
    assert by_id(result, "eager_attention") is not None
    assert by_id(result, "gemm_misaligned") is None


def test_fix_text_follows_the_device() -> None:
    def model(name: str, **raw: Any) -> device_model.DeviceModel:
        return device_model.build({"id": 0, "name": name, **raw})

    mi300 = model("AMD Instinct MI300X", gcnArchName="gfx942", computeMajor=9, computeMinor=4)
    assert "ROCm" in attention_fix(mi300, "bf16")
    v100 = model("Tesla V100-SXM2-16GB", computeMajor=7, computeMinor=0)
    assert "no flash attention" in attention_fix(v100, "fp16")
    h100 = model("NVIDIA H100 80GB HBM3", computeMajor=9, computeMinor=0)
    assert "memory-efficient" in attention_fix(h100, "fp32")
    assert "not known" in attention_fix(model("Mystery Accelerator 9000"), "bf16")
    assert 0 < FUSED_ATTENTION_EFFICIENCY < 1


# ---- the what-if transformation ------------------------------------------------------------


def test_fuse_kernels_gives_the_chosen_kernels_the_fused_time(tmp_path: Path) -> None:
    # one step: three 100 µs kernels back to back, launched early; fuse the last two into 50 µs
    events = [op("ProfilerStep#1", 0, 20, cat="user_annotation")]
    for i in range(3):
        events.append(launch("cudaLaunchKernel", 1 + i, 1, correlation=i + 1))
        events.append(kernel(GEMM, 100 + 100 * i, 100, correlation=i + 1))
    trace = load(write_trace(tmp_path / "fuse.json", events, baseTimeNanoseconds=0), cache=False)
    ids = tuple(int(i) for i in trace.kernels.sort("ts_ns")["id"].to_list()[1:])
    result = whatif(trace, [FuseKernels(ids, 50_000, "two kernels")])
    assert result.saving_ns == 150_000
    # a fusion slower than the recorded kernels is not applied
    assert whatif(trace, [FuseKernels(ids, 10**9)]).saving_ns == 0
    assert FuseKernels(ids, 1).to_dict()["kernels"] == 2


# ---- third-party traces: fused attention, never named ------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "h100_falconsai_vit.json.gz",
        "mi300_falconsai_vit.json.gz",
        "mi300_bert_small.json.gz",
        "vllm_decode_full/graph_execution.json.gz",
        "vllm_prefilldecode_piecewise/graph_execution.json.gz",
        "sglang_decode/decode.json.gz",
    ],
)
def test_fused_attention_traces_are_not_named(name: str) -> None:
    path = TRACELENS / name
    if not path.exists():
        pytest.skip(f"{path} is not here (third-party traces live in ../shared)")
    result = analysed(path).sections["findings"]
    assert isinstance(result, FindingsResult)
    assert by_id(result, "eager_attention") is None


def test_xdit_names_only_the_t5_text_encoders_written_out_attention() -> None:
    # Flux's own attention runs fused (aiter/sage); its T5 text encoder (Hugging Face T5, an
    # additive position bias between the matmuls) writes attention out: that one is named.
    path = TRACELENS / "xdit_flux_aiter_sage" / "profile_trace_rank_0.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not here (third-party traces live in ../shared)")
    result = analysed(path).sections["findings"]
    assert isinstance(result, FindingsResult)
    f = by_id(result, "eager_attention")
    assert f is not None and f.saving_pct < 5
    assert any("modeling_t5" in loc for loc in f.evidence.locations)
    assert all("512,512" in (o.shapes or "") or o.name == "aten::bmm" for o in f.evidence.ops)


# ---- gemm_misaligned's fix names the dimension and the multiple its dtype needs -------------------


def _mm_trace(dims: list[list[int]], types: list[str]) -> HandMadeTrace:
    t = HandMadeTrace()
    t.step(1, 0, 4 * 1000 + 100)
    for i in range(4):
        ts = 20.0 + i * 1000
        t.host("aten::mm", ts - 10, 8, args={"Input Dims": dims, "Input type": types})
        t.gpu(GEMM, ts, 900, launch_ts=ts - 9)
    return t


def test_misaligned_fix_names_a_square_gemms_dimension_not_a_vocabulary(tmp_path: Path) -> None:
    f = by_id(findings(write_h200(_mm_trace([[8191, 8191], [8191, 8191]], [BF16, BF16]), tmp_path / "sq.json")), "gemm_misaligned")
    assert f is not None
    assert "vocab" not in f.fix and "8191 (bf16: multiples of 8) → 8192" in f.fix


def test_misaligned_fix_of_tf32_uses_multiples_of_4(tmp_path: Path) -> None:
    tf32 = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
    t = _mm_trace([[4096, 4094], [4094, 4096]], ["float", "float"])
    for e in t.events:
        if e.get("name") == GEMM:
            e["name"] = tf32
    f = by_id(findings(write_h200(t, tmp_path / "tf32.json")), "gemm_misaligned")
    assert f is not None
    assert "tf32: multiples of 4 elements" in f.fix and "4094 (tf32: multiples of 4) → 4096" in f.fix


def test_generic_fusion_counts_only_what_it_adds_to_sdpa() -> None:
    # The scale, mask, softmax and cast kernels of written-out attention are also chains of
    # memory-bound kernels: unfused_elementwise is replayed on top of the fused attention.
    r = _model("attention_before")
    attention, fusion = by_id(r, "eager_attention"), by_id(r, "unfused_elementwise")
    assert attention is not None and fusion is not None
    # whichever ranks lower is replayed after the other and lists only what it adds
    lower, upper = sorted((attention, fusion), key=lambda f: f.saving_pct)
    assert f"replayed after the fixes of {upper.id}" in (lower.overlap or "")
    assert lower.alone_pct is not None and lower.saving_pct < lower.alone_pct - 0.5
    assert fusion.alone_pct is not None and fusion.saving_pct <= fusion.alone_pct + 0.05
