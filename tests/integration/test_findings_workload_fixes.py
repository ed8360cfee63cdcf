"""Fix texts fitted to the workload: no gradient-bucket advice where no gradients are reduced,
no per-request advice outside a serving engine. Hand-made traces (written by hand, not
recorded), the samples and the third-party serving traces."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from tests.integration.test_findings_comm import ALLREDUCE, _allreduce, per_parameter_trace
from traceinsight.analysis.findings.detect.advice import (
    communication_advice,
    host_work_advice,
    preprocessing_advice,
    sync_advice,
)
from traceinsight.analysis.findings.read.workload import Workload, detect
from traceinsight.trace.loader import load

SHARED = Path(__file__).resolve().parents[3].joinpath("shared/third_party")
GRADIENT_WORDS = ("DDP", "DistributedDataParallel", "bucket_cap_mb", "gradient", "backward", "zero_grad", "fused=True")
SERVING_TRACES = [
    "tracelens/vllm_decode_full/graph_execution.json.gz",
    "tracelens/vllm_prefilldecode_piecewise/graph_execution.json.gz",
    "tracelens/sglang_decode/decode.json.gz",
    "tracelens/xdit_flux_aiter_sage/profile_trace_rank_0.json.gz",
]
TRAINING = Workload("training")
INFERENCE = Workload("inference")
SERVING = Workload("decode", serving=True, engine="vLLM")
DIFFUSION = Workload("inference", serving=True, engine="xDiT")
UNKNOWN = Workload("unknown")


def tensor_parallel_trace(calls: int = 200) -> HandMadeTrace:
    """Three forward passes, each 2 ms of GEMMs then ``calls`` small all-reduces one after the
    other (tensor parallelism's, one per layer): no backward, no optimizer."""
    t = HandMadeTrace()
    step_us = 2_200 + calls * 30 + 200
    for s in range(3):
        base = s * step_us
        t.step(s + 1, base, step_us)
        t.host("aten::mm", base + 10, 10)
        t.gpu("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", base + 20, 2_000, launch_ts=base + 12)
        for i in range(calls):
            _allreduce(t, base + 2_200 + i * 30, 1_024, 20)
    return t


def test_a_forward_pass_s_small_allreduces_get_no_gradient_bucket_advice(tmp_path: Path) -> None:
    trace = write_h200(tensor_parallel_trace(), tmp_path / "tp.json")
    assert detect(trace).kind == "inference"
    result = findings(trace)
    assert by_id(result, "allreduce_per_parameter") is None
    exposed = by_id(result, "exposed_communication")
    assert exposed is not None and "tensor-parallel" in exposed.fix
    for f in (*result.findings, *result.not_material):
        assert not any(w in f.fix for w in GRADIENT_WORDS), (f.id, f.fix)
    # the same all-reduces after a backward pass are gradients: bucket them
    training = findings(write_h200(per_parameter_trace(200), tmp_path / "pp.json"))
    f = by_id(training, "allreduce_per_parameter")
    assert f is not None and "DistributedDataParallel" in f.fix


def test_gpu_only_allreduces_get_both_readings(tmp_path: Path) -> None:
    # kernels and their launches only (no host ops): the trace cannot tell gradients from
    # tensor parallelism, so the fix gives both readings
    text = communication_advice(UNKNOWN)
    assert text is not None and "gradients" in text and "tensor-parallel" in text
    assert communication_advice(TRAINING) is None  # the training text (DDP buckets)
    t = HandMadeTrace()
    for s in range(3):
        base = s * 6_000.0
        t.gpu("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", base + 20, 2_000, launch_ts=base + 12)
        t.gpu(ALLREDUCE, base + 2_100, 3_000, launch_ts=base + 2_050, stream=20, args={"Collective name": "allreduce"})
    trace = write_h200(t, tmp_path / "gpu_only.json")
    assert detect(trace).kind == "unknown"
    exposed = by_id(findings(trace), "exposed_communication")
    assert exposed is not None and exposed.fix == text


@pytest.mark.parametrize("workload", [TRAINING, INFERENCE, SERVING, DIFFUSION])
def test_per_request_advice_only_in_a_serving_engine(workload: Workload) -> None:
    texts = [preprocessing_advice(workload, ""), host_work_advice(workload) or "", sync_advice(workload) or ""]
    said = any("request" in t for t in texts)
    assert said is workload.serving, texts
    epochs = any("epoch" in t for t in texts)
    assert epochs is workload.training, texts
    if workload.serving:
        assert str(workload.engine) in texts[0]
    # losses and metrics are a training loop's
    assert (sync_advice(workload) is None) is workload.training


@pytest.mark.skipif(not SHARED.exists(), reason="third-party traces are in ../shared")
@pytest.mark.parametrize("name", SERVING_TRACES)
def test_serving_traces_get_no_training_advice(name: str) -> None:
    trace = load(SHARED / name)
    assert detect(trace).serving
    result = findings(trace)
    for f in (*result.findings, *result.not_material):
        assert not any(w in f.fix for w in GRADIENT_WORDS), (f.id, f.fix)
        assert "epoch" not in f.fix and "DataLoader" not in f.fix, (f.id, f.fix)
        assert "losses" not in f.fix, (f.id, f.fix)


@pytest.mark.parametrize("name", ["train_eager", "dataloader_w0", "amp_off"])
def test_training_samples_get_no_per_request_advice(name: str) -> None:
    trace = load(ROOT / "sample_traces" / f"{name}.json.gz")
    assert detect(trace).training
    result = findings(trace)
    for f in (*result.findings, *result.not_material):
        assert "request" not in f.fix, (f.id, f.fix)
