"""unfused_elementwise: recurring chains of memory-bound kernels between compute kernels.

Hand-made traces (written by hand, not recorded by a profiler) for the edges, the recorded
eager/compiled pair for the measured saving, third-party traces where they are present."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import ROOT
from tests.findings_helpers import by_id, context, findings, write_h200
from tests.handmade import HandMadeTrace, kernel, launch
from traceinsight.analysis.findings import find
from traceinsight.analysis.findings.catalogue import BANDWIDTH_EFFICIENCY, MATERIALITY_PCT
from traceinsight.analysis.findings.detect.fusion import detect_unfused_elementwise
from traceinsight.analysis.findings.read.chains import find_chains
from traceinsight.analysis.whatif.fuse import FuseChains
from traceinsight.analysis.whatif.graph import build as build_graph
from traceinsight.analysis.whatif.model import whatif
from traceinsight.analysis.whatif.replay import Durations
from traceinsight.trace.loader import load

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >"
GELU = "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)>"
MUL = "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >"
TRITON_POI = "triton_poi_fused_add_gelu_mul_0"
TRITON_RED = "triton_red_fused_mean_pow_1"
H200_RATE = 4.8e3 * BANDWIDTH_EFFICIENCY  # bytes per ns the fused kernel streams at
MODELS = ROOT / "sample_traces" / "models"
CATALOGUE = ROOT / "sample_traces" / "catalogue"
THIRD_PARTY = ROOT.parent / "shared" / "third_party" / "tracelens"
if not THIRD_PARTY.exists():
    THIRD_PARTY = Path(__file__).resolve().parents[3].joinpath("shared/third_party/tracelens")


def layers_trace(
    chain: list[tuple[str, float]],
    *,
    steps: int = 4,
    layers: int = 2,
    gemm_us: float = 400.0,
    shapes: list[list[int]] | None = None,
) -> HandMadeTrace:
    """Hand-made: per step, ``layers`` × (GEMM, then the chain's kernels back to back); every
    kernel launched long before it runs (the host is ahead: no launch waits)."""
    t = HandMadeTrace()
    chain_us = sum(d for _, d in chain)
    step_us = layers * (gemm_us + chain_us + 2 * (len(chain) + 1)) + 50
    for s in range(steps):
        base = s * step_us
        t.step(s + 1, base, step_us)
        ts = base + 30
        launch = base + 1
        for _ in range(layers):
            t.gpu(GEMM, ts, gemm_us, launch_ts=launch, launch_dur=0.5)
            launch += 1
            ts += gemm_us + 2
            for name, dur in chain:
                if shapes is not None:
                    t.host(
                        "aten::add", launch - 0.2, 0.9,
                        args={"Input Dims": shapes, "Input type": ["c10::BFloat16"] * len(shapes)},
                    )
                t.gpu(name, ts, dur, launch_ts=launch, launch_dur=0.5)
                launch += 1
                ts += dur + 2
    return t


def test_recurring_chain_between_gemms_is_found_with_the_hand_computed_saving(tmp_path: Path) -> None:
    # 4 steps × 2 layers × (add 100 µs, gelu 60 µs, mul 80 µs) between GEMMs, no shapes: the
    # fused kernel reads the first kernel's inputs and writes the last's output, each half
    # of what that kernel moved (100/2 + 80/2 = 90 µs), but never takes less than the chain's
    # longest kernel, whose work it also does: 100 µs instead of 240 µs, per occurrence.
    trace = write_h200(layers_trace([(ADD, 100), (GELU, 60), (MUL, 80)]), tmp_path / "t.json")
    r = findings(trace)
    f = by_id(r, "unfused_elementwise")
    assert f is not None and f.material
    assert f.saving_window_ns == 8 * (240_000 - 100_000)
    figures = dict(f.evidence.figures)
    assert figures["chains"] == 8 and figures["launch_idle_ns"] == 0
    assert f.confidence == "medium"  # no shapes: the ends' bytes from their durations
    assert [k.name for k in f.evidence.kernels] == [ADD, GELU, MUL]
    assert "torch.compile" in f.fix and "gelu" in f.fix.lower()
    (transform,) = by_id_transforms(trace, "unfused_elementwise")
    assert isinstance(transform, FuseChains) and len(transform.chains) == 8
    assert all(ns == 100_000 and len(ids) == 3 for ids, ns in transform.chains)


def by_id_transforms(trace, finding_id: str):  # type: ignore[no-untyped-def]
    est = detect_unfused_elementwise(context(trace))
    assert est is not None and est.finding.id == finding_id
    return est.transforms


def test_fused_time_comes_from_the_ops_shapes_where_recorded(tmp_path: Path) -> None:
    # Each op adds two 4096 × 4096 bf16 tensors: 3 × 32 MiB moved, in 25 µs (above the
    # streaming rate the fused kernel is priced at); the fused kernel moves half of the first's
    # and half of the last's at the H200's streaming rate (30 µs, longer than any one kernel).
    shapes = [[4096, 4096], [4096, 4096]]
    trace = write_h200(layers_trace([(ADD, 25), (ADD, 25), (ADD, 25)], shapes=shapes), tmp_path / "t.json")
    moved = 3 * 4096 * 4096 * 2
    fused_ns = round(moved / 2 / H200_RATE + moved / 2 / H200_RATE)
    assert fused_ns > 25_000
    f = by_id(findings(trace), "unfused_elementwise")
    assert f is not None and f.confidence == "high"
    assert f.saving_window_ns == pytest.approx(8 * (75_000 - fused_ns), abs=8)


def test_a_fused_kernel_is_never_priced_below_the_chain_s_longest_kernel(tmp_path: Path) -> None:
    # The same ops at 100 µs each: the ends' bytes (30 µs) would price the fused kernel below
    # any one of the kernels it replaces; it does each one's work, so it takes at least 100 µs.
    shapes = [[4096, 4096], [4096, 4096]]
    trace = write_h200(layers_trace([(ADD, 100), (ADD, 100), (ADD, 100)], shapes=shapes), tmp_path / "t.json")
    f = by_id(findings(trace), "unfused_elementwise")
    assert f is not None
    assert f.saving_window_ns == 8 * (300_000 - 100_000)


NCHW_TO_NHWC = "void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, __nv_bfloat16 const*, __nv_bfloat16*)"


def test_a_convolution_s_own_layout_conversions_are_not_fused_with_the_ops_after_it(tmp_path: Path) -> None:
    # Per layer: cuDNN's NCHW -> NHWC conversion launched inside aten::cudnn_convolution, then
    # add, gelu and mul launched by their own ops. The conversion runs inside the library call:
    # the run that a fuser could merge is the three ops after it, not four kernels.
    t = HandMadeTrace()
    for s_ in range(4):
        base = s_ * 2_000
        t.step(s_ + 1, base, 2_000)
        ts, host = base + 30.0, base + 1.0
        for _ in range(2):
            t.host("aten::cudnn_convolution", host, 3)
            t.gpu(NCHW_TO_NHWC, ts, 50, launch_ts=host + 0.5, launch_dur=1)
            t.gpu(GEMM, ts + 52, 400, launch_ts=host + 1.6, launch_dur=1)
            ts, host = ts + 454, host + 4
            for name, dur in ((ADD, 100), (GELU, 60), (MUL, 80)):
                t.host("aten::add", host, 2)
                t.gpu(name, ts, dur, launch_ts=host + 0.5, launch_dur=1)
                ts, host = ts + dur + 2, host + 3
    chains = find_chains(write_h200(t, tmp_path / "t.json"), "nvidia")
    assert chains.height == 8
    assert set(chains["kernels"].to_list()) == {3}
    assert not any("nchwToNhwc" in n for names in chains["names"].to_list() for n in names)


def test_launch_waits_inside_a_chain_go_with_the_fusion_and_leave_launch_bound(tmp_path: Path) -> None:
    # Each chain kernel after the first is launched after the one before it ended, and starts
    # 4 µs later: one launch instead of three gives back 2 × 4 µs per chain, which
    # launch_bound (counting the same idle) gives up.
    t = HandMadeTrace()
    for s in range(4):
        t.step(s + 1, s * 1_500, 1_500)
        ts = s * 1_500 + 30.0
        for _ in range(2):
            t.gpu(GEMM, ts, 400, launch_ts=ts - 20, launch_dur=0.5)
            ts += 402
            for name, dur in ((ADD, 100), (GELU, 60), (MUL, 80)):
                # the device waits: the launch returns 1 µs after the last kernel ended (the
                # wait before the chain's first kernel stays: the fused kernel is launched too)
                ts += 4
                t.gpu(name, ts, dur, launch_ts=ts - 3, launch_dur=2)
                ts += dur
            ts += 2
    trace = write_h200(t, tmp_path / "t.json")
    r = findings(trace)
    f = by_id(r, "unfused_elementwise")
    assert f is not None and dict(f.evidence.figures)["launch_idle_ns"] == 8 * 2 * 4_000
    launch = by_id(r, "launch_bound")
    assert launch is not None and "counted under unfused_elementwise" in (launch.overlap or "")


def test_fix_follows_the_device_and_what_is_already_compiled(tmp_path: Path) -> None:
    # MI300X (ROCm): Inductor's Triton kernels exist there too, and the fix says so.
    from tests.unit.test_findings_device import MI300X, write_on

    chain = [(ADD, 100), (GELU, 60), (MUL, 80)]
    rocm = by_id(findings(write_on(layers_trace(chain), tmp_path / "rocm.json", MI300X)), "unfused_elementwise")
    assert rocm is not None and "ROCm" in rocm.fix and "torch.compile(model)" in rocm.fix
    # Inductor kernels elsewhere in the step: the chains are eager code beside the compiled graphs
    t = layers_trace(chain)
    t.gpu(TRITON_POI, 1_000_000, 50, launch_ts=999_990)
    compiled = by_id(findings(write_h200(t, tmp_path / "mixed.json")), "unfused_elementwise")
    assert compiled is not None and "outside the compiled graphs" in compiled.fix
    # an Inductor kernel inside the chains themselves (vLLM: a Triton kernel then a custom op's
    # rotary kernel): the chains cross the edge of the compiled code, not eager code beside it
    edge = by_id(findings(write_h200(layers_trace([(TRITON_POI, 50), (GELU, 60), (MUL, 80)]), tmp_path / "edge.json")), "unfused_elementwise")
    assert edge is not None and "cross the edge of the compiled code" in edge.fix
    assert "outside the compiled graphs" not in edge.fix


def test_a_single_elementwise_kernel_between_gemms_is_no_chain(tmp_path: Path) -> None:
    trace = write_h200(layers_trace([(ADD, 200)]), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


@pytest.mark.parametrize("chain", [[TRITON_POI], [TRITON_RED, TRITON_POI]], ids=["one", "two"])
def test_compiled_kernels_between_gemms_are_the_compilers_fusion(tmp_path: Path, chain: list[str]) -> None:
    # Inductor's kernels are the fused result: one between GEMMs, or a reduction and the
    # pass that needs it, is what the compiler chose, not a candidate.
    trace = write_h200(layers_trace([(n, 150) for n in chain]), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


def test_a_chain_that_does_not_recur_is_not_a_pattern(tmp_path: Path) -> None:
    trace = write_h200(layers_trace([(ADD, 100), (MUL, 80)], steps=1, layers=1), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


def test_a_tiny_chain_is_not_material(tmp_path: Path) -> None:
    # 2 µs kernels between 2 ms GEMMs: the saving is far below the materiality threshold.
    trace = write_h200(layers_trace([(ADD, 2), (MUL, 2), (ADD, 2)], gemm_us=2_000), tmp_path / "t.json")
    f = by_id(findings(trace), "unfused_elementwise")
    assert f is not None and not f.material and f.saving_pct < MATERIALITY_PCT


def test_softmax_between_two_gemms_is_left_to_fused_attention(tmp_path: Path) -> None:
    softmax = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
    trace = write_h200(layers_trace([(MUL, 50), (softmax, 80)]), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


def test_chains_are_cut_at_copies_between_memories(tmp_path: Path) -> None:
    # add, a device-to-host copy (a sync point), add: two single kernels, no chain.
    t = layers_trace([(ADD, 100)])
    trace_path = tmp_path / "t.json"
    extra = HandMadeTrace(next_correlation=10_000)
    step_us = 2 * (400 + 100 + 4) + 50
    for s in range(4):
        base = s * step_us + 30 + 400 + 2 + 100 + 0.5
        extra.gpu("Memcpy DtoH (Device -> Pinned)", base, 0.5, cat="gpu_memcpy", launch_ts=base - 100,
                  launch_name="cudaMemcpyAsync")
        extra.gpu(MUL, base + 0.6, 0.8, launch_ts=base - 99)
    t.events += extra.events
    trace = write_h200(t, trace_path)
    chains = find_chains(trace, "nvidia")
    assert chains.height == 0


def test_foreach_kernels_are_no_chain(tmp_path: Path) -> None:
    # multi_tensor_apply kernels each touch many tensors (an optimizer's, a gradient clip's):
    # priced by unfused_optimizer, not as a chain one kernel could stream.
    foreach = (
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)"
        "::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0> >"
    )
    trace = write_h200(layers_trace([(foreach, 100), (foreach, 80)]), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


def test_fuse_chains_gives_each_chain_its_fused_time_in_the_replay(tmp_path: Path) -> None:
    trace = write_h200(layers_trace([(ADD, 100), (GELU, 60), (MUL, 80)]), tmp_path / "t.json")
    chains = find_chains(trace, "nvidia")
    graph = build_graph(trace)
    fuse = FuseChains(tuple((tuple(ids), 90_000) for ids in chains["ids"].to_list()))
    out = fuse.apply(graph, Durations.recorded(graph))
    ids = graph.gpu_work["id"].to_numpy()
    for chain_ids in chains["ids"].to_list():
        sel = np.isin(ids, chain_ids)
        assert int(out.gpu_dur_ns[sel].sum()) == pytest.approx(90_000, abs=3)
    others = ~np.isin(ids, np.concatenate(chains["ids"].to_list()))
    assert (out.gpu_dur_ns[others] == graph.gpu_dur_ns[others]).all()
    assert fuse.to_dict()["kernels"] == 24


def test_fuse_chains_drops_the_launches_of_all_but_the_first_kernel(tmp_path: Path) -> None:
    # one launch call per kernel: the chain's later launches take no host time; a graph
    # launch (one call for every kernel of the graph) keeps its time
    trace = write_h200(layers_trace([(ADD, 100), (GELU, 60), (MUL, 80)]), tmp_path / "t.json")
    graph = build_graph(trace)
    ids = [tuple(c) for c in find_chains(trace, "nvidia")["ids"].to_list()]
    out = FuseChains(tuple((c, 90_000) for c in ids)).apply(graph, Durations.recorded(graph))
    node = {int(i): n for n, i in enumerate(graph.gpu_work["id"].to_list())}
    for chain in ids:
        segs = graph.host_seg[graph.gpu_launch[[node[i] for i in chain]]]
        assert out.seg_dur_ns[segs[0]] == graph.seg_dur_ns[segs[0]] > 0
        assert (out.seg_dur_ns[segs[1:]] == 0).all()

    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    for layer in range(2):
        base = 100 + layer * 800
        t.events.append(launch("cudaGraphLaunch", base - 50, 10, 500 + layer, pid=100, tid=1))
        t.events.append(kernel(GEMM, base, 400, 500 + layer))
        for i, (name, dur) in enumerate(((ADD, 100), (MUL, 80))):
            t.events.append(kernel(name, base + 402 + i * 102, dur, 500 + layer))
    trace = write_h200(t, tmp_path / "graph.json")
    graph = build_graph(trace)
    ids = [tuple(c) for c in find_chains(trace, "nvidia")["ids"].to_list()]
    assert len(ids) == 2
    out = FuseChains(tuple((c, 50_000) for c in ids)).apply(graph, Durations.recorded(graph))
    assert (out.seg_dur_ns == graph.seg_dur_ns).all()


# -- the recorded pairs: eager vs torch.compile --------------------------------------------


def _measured_ms(pair: str) -> tuple[float, float]:
    """(before, after) step time in ms, measured with CUDA events outside the profiler."""
    if pair == "fusion":
        row = next(r for r in json.loads((MODELS / "model_timings.json").read_text()) if r["pair"] == "fusion")
        return row["before_ms"], row["after_ms"]
    rows = json.loads((CATALOGUE / "timings.json").read_text())
    side = {r["side"]: r["ms"] for r in rows if r["pair"] == pair}
    return side["before"], side["after"]


COMPILE_PAIRS = [
    # an elementwise chain (bias, GELU, residual, RMS norm written out) over 16384 × 4096 bf16
    pytest.param("fusion", MODELS / "model_fusion_before.json.gz", MODELS / "model_fusion_after.json.gz", id="fusion"),
    # a Llama-style decoder (8 layers, 2048 wide), bf16 prefill 8 × 1024, SDPA in both
    pytest.param("llama", CATALOGUE / "llama_eager.json.gz", CATALOGUE / "llama_compiled.json.gz", id="llama"),
]


@pytest.mark.parametrize(("pair", "before", "after"), COMPILE_PAIRS)
def test_eager_trace_names_it_within_1_5x_of_the_measured_saving(pair: str, before: Path, after: Path) -> None:
    before_ms, after_ms = _measured_ms(pair)
    saving_ms = before_ms - after_ms
    r = findings(load(before, cache=False))
    assert r.findings and r.findings[0].id == "unfused_elementwise"
    f = r.findings[0]
    predicted_ms = f.saving_ns / 1e6
    assert saving_ms / 1.5 <= predicted_ms <= saving_ms * 1.5, (predicted_ms, saving_ms)
    assert f.confidence == "high"
    assert "torch.compile(model)" in f.fix and "RMSNorm" in f.fix


@pytest.mark.parametrize(("pair", "before", "after"), COMPILE_PAIRS)
def test_replayed_fusion_saves_what_the_compiled_run_measured(pair: str, before: Path, after: Path) -> None:
    # The finding's fix as a what-if (its FuseChains), replayed through the step graph.
    before_ms, after_ms = _measured_ms(pair)
    trace = load(before, cache=False)
    est = detect_unfused_elementwise(context(trace))
    assert est is not None
    result = whatif(trace, est.transforms)
    assert result.explained
    measured_pct = 100.0 * (before_ms - after_ms) / before_ms
    assert measured_pct / 1.5 <= result.saving_pct <= measured_pct * 1.5, (result.saving_pct, measured_pct)


def test_fix_names_the_fused_kernels_the_chains_point_at() -> None:
    fusion = findings(load(MODELS / "model_fusion_before.json.gz", cache=False)).findings[0]
    assert "gelu" in fusion.fix and "rotary" not in fusion.fix
    llama = findings(load(CATALOGUE / "llama_eager.json.gz", cache=False)).findings[0]
    assert "rotary" in llama.fix and "gelu" not in llama.fix  # rotate_half written out: neg + cat


@pytest.mark.parametrize(("pair", "before", "after"), COMPILE_PAIRS)
def test_compiled_trace_does_not_name_it_at_a_material_saving(pair: str, before: Path, after: Path) -> None:
    f = by_id(findings(load(after, cache=False)), "unfused_elementwise")
    assert f is None or not f.material


# -- third-party traces (skipped where they are not present) ----------------------------------

needs_third_party = pytest.mark.skipif(not THIRD_PARTY.exists(), reason="third-party traces not present")


@needs_third_party
@pytest.mark.parametrize("name", ["sglang_decode/decode.json.gz", "vllm_prefilldecode_piecewise/graph_execution.json.gz"])
def test_llm_inference_names_its_norm_and_rotary_chains(name: str) -> None:
    trace = load(THIRD_PARTY / name, cache=False)
    f = by_id(find(context(trace)), "unfused_elementwise")
    # Named; on the graph-replayed SGLang decode the replay keeps the step host-bound, so its
    # replayed saving may fall below materiality while the chains' device time is material.
    assert f is not None and (f.material or (f.claim_pct is not None and f.claim_pct >= 1.0))


@needs_third_party
def test_compiled_triton_trace_does_not_lead_with_it() -> None:
    r = findings(load(THIRD_PARTY / "torch_compile_triton.json.gz", cache=False))
    assert not r.findings or r.findings[0].id != "unfused_elementwise"


@needs_third_party
def test_normalization_layers_chains_are_physically_possible() -> None:
    trace = load(THIRD_PARTY / "normalization_layers.json.gz", cache=False)
    chains = find_chains(trace, "nvidia")
    assert (chains["kernels"] >= 2).all()
    f = by_id(findings(trace), "unfused_elementwise")
    if f is not None:
        assert 0 < f.saving_window_ns <= f.estimate_ns
        assert dict(f.evidence.figures)["fused_ns"] <= dict(f.evidence.figures)["chain_kernel_ns"]
    assert pl.DataFrame({"n": chains["occurrences"]}).height == chains.height
