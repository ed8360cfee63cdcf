"""Training, inference or decoding, read from the trace, and advice that fits it: no optimizer,
zero_grad, DDP or DataLoader text for a forward-only program; CUDA (HIP) graphs with a static
KV cache for a decode loop, not larger batches. Hand-made traces are written by hand, not
recorded; the third-party traces are real and skip when ``../shared`` is absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.findings_helpers import by_id, findings, ids, write_h200
from tests.handmade import HandMadeTrace
from tests.unit.test_findings_device import MI300X, write_on
from traceinsight.analysis.findings.read.workload import DECODE_MIN_REPEATS, detect
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int)"
SHARED = Path(__file__).resolve().parents[3].joinpath("shared/third_party")
DECODE = ROOT / "sample_traces" / "decode"
# Advice that only a training loop can use.
TRAINING_WORDS = ("fused=True", "zero_grad", "bucket_cap_mb", "DDP(", "GradScaler", "gradient accumulation", "activation checkpointing")


def launches(t: HandMadeTrace, op: str, n: int, *, dims: str | None = None, t0: float = 10.0) -> float:
    """``n`` launch-bound calls of ``op`` (2 µs kernels behind 12 µs launches)."""
    ts = t0
    for _ in range(n):
        t.host(op, ts, 15, args={"Input Dims": json.loads(dims)} if dims else None)
        t.gpu(ADD, ts + 16, 2, launch_ts=ts + 2, launch_dur=12)
        ts += 19
    return ts


def program(first_op: str, *, op: str = "aten::add", dims: str | None = None, n: int = 200) -> HandMadeTrace:
    t = HandMadeTrace()
    t.step(1, 0, 20 * n + 100)
    t.host(first_op, 1, 2)
    launches(t, op, n, dims=dims)
    return t


def kind(t: HandMadeTrace, path: Path) -> str:
    return detect(write_h200(t, path)).kind


def test_backward_optimizer_and_forward_only(tmp_path: Path) -> None:
    assert kind(program("aten::mul"), tmp_path / "f.json") == "inference"
    for marker in ("MmBackward0", "autograd::engine::evaluate_function: AddBackward0", "aten::convolution_backward", "aten::_fused_adamw_"):
        assert kind(program(marker), tmp_path / "b.json") == "training", marker
    t = program("aten::mul")
    t.host("Optimizer.step#AdamW.step", 3, 1, cat="user_annotation")
    assert kind(t, tmp_path / "o.json") == "training"


def test_decode_needs_one_query_token_against_a_longer_cache(tmp_path: Path) -> None:
    sdpa = "aten::scaled_dot_product_attention"
    one = "[[1,16,1,64],[1,16,80,64],[1,16,80,64]]"
    assert kind(program("aten::mul", op=sdpa, dims=one, n=DECODE_MIN_REPEATS), tmp_path / "d.json") == "decode"
    # Too few calls to be a loop over tokens; a full sequence (prefill, encoder); GEMV-like
    # matmuls of a small batch without any cache: all inference.
    assert kind(program("aten::mul", op=sdpa, dims=one, n=DECODE_MIN_REPEATS - 1), tmp_path / "d1.json") == "inference"
    full = "[[1,16,80,64],[1,16,80,64],[1,16,80,64]]"
    assert kind(program("aten::mul", op=sdpa, dims=full, n=64), tmp_path / "p.json") == "inference"
    gemv = "[[1,1024],[1024,1024]]"
    assert kind(program("aten::mul", op="aten::mm", dims=gemv, n=64), tmp_path / "g.json") == "inference"
    # Eager attention: a 4-D matmul of one query row against the cache's keys.
    eager = "[[1,12,1,64],[1,12,64,33]]"
    assert kind(program("aten::mul", op="aten::matmul", dims=eager, n=64), tmp_path / "e.json") == "decode"


def test_serving_engines_and_gpu_only_traces(tmp_path: Path) -> None:
    t = program("aten::mul")
    t.host("vllm/v1/worker/gpu_model_runner.py(1784): execute_model", 2, 1, cat="python_function")
    w = detect(write_h200(t, tmp_path / "v.json"))
    assert (w.kind, w.serving, w.engine) == ("decode", True, "vLLM")
    t = program("aten::mul")
    t.host("/app/xDiT/xfuser/runner.py(61): initialize", 2, 1, cat="python_function")
    w = detect(write_h200(t, tmp_path / "x.json"))
    assert (w.kind, w.serving) == ("inference", True)
    gpu_only = HandMadeTrace()
    gpu_only.gpu(ADD, 10, 5)
    path = tmp_path / "k.json"
    gpu_only.write(path)
    assert detect(load(path, cache=False)).kind == "unknown"
    gpu_only.gpu("void at::native::batch_norm_backward_kernel<float>(int)", 20, 5)
    gpu_only.write(path)
    assert detect(load(path, cache=False)).kind == "training"


def test_launch_advice_fits_the_workload_and_the_device(tmp_path: Path) -> None:
    decode = program("aten::mul", op="aten::scaled_dot_product_attention", dims="[[1,16,1,64],[1,16,80,64],[1,16,80,64]]")
    f = by_id(findings(write_h200(decode, tmp_path / "d.json")), "launch_bound")
    assert f is not None and "cache_implementation='static'" in f.fix and "reduce-overhead" in f.fix
    assert "CUDA graphs" in f.fix and "larger batches so" not in f.fix
    f = by_id(findings(write_on(decode, tmp_path / "dr.json", MI300X)), "launch_bound")
    assert f is not None and "HIP graphs" in f.fix and "CUDA graphs" not in f.fix and "static" in f.fix
    f = by_id(findings(write_h200(program("aten::mul"), tmp_path / "i.json")), "launch_bound")
    assert f is not None and "static" not in f.fix and "more inputs per call" in f.fix
    f = by_id(findings(write_h200(program("MmBackward0"), tmp_path / "t.json")), "launch_bound")
    assert f is not None and "larger batches" in f.fix and "static" not in f.fix


def _measured_pct(name: str, graph: str) -> float:
    rows = {r["name"]: r for r in json.loads((DECODE / "decode_timings.json").read_text())}
    return 100.0 * (1 - rows[graph]["ms_per_token"] / rows[name]["ms_per_token"])


@pytest.mark.parametrize("name", ["decode_eager", "hf_generate"])
def test_decode_samples_get_graph_advice_not_training_advice(name: str, tmp_path: Path) -> None:
    trace: Trace = load(DECODE / f"{name}.json.gz")
    assert detect(trace).kind == "decode"
    r = findings(trace)
    assert r.workload == "decode" and "one query token" in r.workload_reason
    assert r.findings[0].id == "launch_bound"
    f = r.findings[0]
    assert "cache_implementation='static'" in f.fix and "larger batches so" not in f.fix
    for g in (*r.findings, *r.not_material):
        assert not any(w in g.fix for w in TRAINING_WORDS), (g.id, g.fix)
        assert g.id not in ("dataloader_stall", "unfused_optimizer")


def test_decode_eager_saving_within_1_5x_of_the_graph_replay_measured() -> None:
    # decode_eager 5.450 -> decode_graph 0.478 ms/token by CUDA events outside the profiler.
    measured = _measured_pct("decode_eager", "decode_graph")
    r = findings(load(DECODE / "decode_eager.json.gz"))
    f = by_id(r, "launch_bound")
    assert measured / 1.5 <= f.saving_pct <= measured * 1.5, (f.saving_pct, measured)
    # The graph replay (no launch calls, no per-token host work) also predicts it.
    from tests.findings_helpers import context
    from traceinsight.analysis.findings.detect import launches
    from traceinsight.analysis.whatif.model import whatif

    trace = load(DECODE / "decode_eager.json.gz")
    est = launches.detect_launch_bound(context(trace))
    assert est is not None and [t.kind for t in est.transforms] == ["graphs", "host"]
    replayed = whatif(trace, est.transforms).saving_pct
    assert measured / 1.5 <= replayed <= measured * 1.5, (replayed, measured)


def test_a_small_batch_mlp_is_inference_not_decode() -> None:
    # fix_launch_before: a batch-8 MLP, GEMV-like matmuls but no KV cache.
    assert detect(load(ROOT / "sample_traces" / "fix_launch_before.json.gz")).kind == "inference"
    assert detect(load(ROOT / "sample_traces" / "train_eager.json.gz")).kind == "training"


THIRD_PARTY_INFERENCE = [
    "tracelens/h100_falconsai_vit.json.gz",
    "tracelens/mi300_falconsai_vit.json.gz",
    "tracelens/mi300_bert_small.json.gz",
    "hta/mtia_inference_rank_0.json.gz",
]
THIRD_PARTY_SERVING = [
    ("tracelens/vllm_decode_full/graph_execution.json.gz", "vLLM", "decode"),
    ("tracelens/vllm_prefilldecode_piecewise/graph_execution.json.gz", "vLLM", "decode"),
    ("tracelens/sglang_decode/decode.json.gz", "SGLang", "decode"),
    ("tracelens/xdit_flux_aiter_sage/profile_trace_rank_0.json.gz", "xDiT", "inference"),
]


@pytest.mark.skipif(not SHARED.exists(), reason="the third-party traces (../shared/third_party beside the checkout) are absent")
@pytest.mark.parametrize("name", THIRD_PARTY_INFERENCE)
def test_third_party_inference_gets_no_training_advice(name: str) -> None:
    trace = load(SHARED / name)
    assert detect(trace).kind == "inference"
    r = findings(trace)
    if not r.available:
        return
    for f in (*r.findings, *r.not_material):
        assert not any(w in f.fix for w in TRAINING_WORDS), (f.id, f.fix)
        assert "training" not in f.fix, (f.id, f.fix)


@pytest.mark.skipif(not SHARED.exists(), reason="the third-party traces (../shared/third_party beside the checkout) are absent")
@pytest.mark.parametrize(("name", "engine", "kind"), THIRD_PARTY_SERVING)
def test_third_party_serving_engines(name: str, engine: str, kind: str) -> None:
    w = detect(load(SHARED / name))
    assert (w.engine, w.serving, w.kind) == (engine, True, kind)


@pytest.mark.skipif(not SHARED.exists(), reason="the third-party traces (../shared/third_party beside the checkout) are absent")
def test_third_party_training_is_training() -> None:
    for name in ("tracelens/mi300_resnet_act_checkpoint.json.gz", "hta/sampled_rank-0.json.gz", "tracelens/mi210_gpu_only.json.gz"):
        assert detect(load(SHARED / name)).kind == "training", name
    assert "memory_pressure" not in ids(findings(load(SHARED / "tracelens/vllm_decode_full/graph_execution.json.gz")), material_only=False)


def test_a_loop_that_already_replays_graphs_is_told_so() -> None:
    # decode_graph replays a graph captured by hand (torch.cuda.graphs): no torch.compile markers.
    f = by_id(findings(load(DECODE / "decode_graph.json.gz")), "launch_bound")
    assert f is not None and "already replays CUDA graphs" in f.fix
    assert f.action == "capture more of the step in CUDA graphs"
