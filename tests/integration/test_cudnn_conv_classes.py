"""cuDNN's fp32 convolution kernels (Volta/Turing scudnn names, its CUDA-core engines and their
weight-gradient reduction) are convolutions on CUDA cores: counted by fp32_no_tensor_cores,
never claimed as elementwise chains."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.findings_helpers import by_id, context, findings, write_h200
from tests.integration.test_findings_fusion import ADD, MUL, layers_trace
from traceinsight.analysis.classify.kernels import classify
from traceinsight.analysis.findings import FindingsResult
from traceinsight.analysis.findings.detect.precision import detect_fp32_no_tensor_cores
from traceinsight.analysis.report import analyze
from traceinsight.trace.loader import load

REDUCE_WGRAD = "void cudnn::cnn::reduce_wgrad_nchw_helper<float, float>(int, int, int, float const*, float*, float, float)"
CAUSES = ROOT / "sample_traces" / "causes_b"


@pytest.mark.parametrize(
    ("name", "family", "precision", "tensor_core"),
    [
        ("volta_scudnn_128x64_relu_interior_nn_v1", "conv_fprop", "fp32", False),
        ("turing_scudnn_128x128_relu_small_nn_v1", "conv_fprop", "fp32", False),
        ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "conv_fprop", "fp32", False),
        ("volta_fp16_s884cudnn_fp16_128x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1", "conv_fprop", "fp16", True),
        (REDUCE_WGRAD, "conv_wgrad", "fp32", False),
        (
            "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, int, int)",
            "conv_dgrad", "fp32", False,
        ),
        (
            "void wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
            "conv_wgrad", "fp32", False,
        ),
    ],
)
def test_cudnn_fp32_convolutions_are_convolutions_on_cuda_cores(
    name: str, family: str, precision: str, tensor_core: bool
) -> None:
    cls = classify(name)
    assert (cls.family, cls.precision, cls.tensor_core) == (family, precision, tensor_core)


def test_the_weight_gradient_reduction_is_no_elementwise_chain(tmp_path: Path) -> None:
    # Between GEMMs, an add, cuDNN's wgrad reduction and a mul: without the reduction the add
    # and mul would be a chain of two; the reduction is convolution work and splits them.
    trace = write_h200(layers_trace([(ADD, 100), (REDUCE_WGRAD, 100), (MUL, 80)]), tmp_path / "t.json")
    assert by_id(findings(trace), "unfused_elementwise") is None


needs_pair = pytest.mark.skipif(not (CAUSES / "precision_fp32.json.gz").exists(), reason="recorded pair absent")


@needs_pair
def test_cudnn_engines_of_an_fp32_resnet_are_priced_by_fp32_no_tensor_cores() -> None:
    # ResNet-50 fp32 on an H200 with TF32 off: cuDNN's dgrad/wgrad engines are most of the
    # convolution time. Timed without the profiler, TF32 saved 53.5 %, bf16 autocast 57.5 %.
    est = detect_fp32_no_tensor_cores(context(load(CAUSES / "precision_fp32.json.gz")))
    assert est is not None
    names = {k.name for k in est.finding.evidence.kernels}
    assert any("dgrad_engine" in n for n in names) and any("wgrad_alg0_engine" in n for n in names)
    share = dict(est.finding.evidence.figures)["share_of_kernel_time_pct"]
    assert share > 60  # the conv engines counted: 33 % when only the xmma kernels were


needs_loader = pytest.mark.skipif(not (CAUSES / "dataloader_cpu_before.json.gz").exists(), reason="recorded pair absent")


@needs_loader
def test_workers_that_cannot_keep_up_are_priced_on_the_window_and_told_to_cut_per_batch_work() -> None:
    # ResNet-18 fed by 4 workers doing per-sample CPU augmentation on an H200: 269.1 ms per
    # step without the profiler; the augmentation moved to the GPU: 16.6 ms (93.8 % saved).
    # The 4 workers hand over their batches in a burst: the waits sit on one step in 4.
    r = findings(load(CAUSES / "dataloader_cpu_before.json.gz"))
    assert r.findings and r.findings[0].id == "dataloader_stall"
    f = r.findings[0]
    assert 93.8 / 1.5 <= f.saving_pct <= 93.8 * 1.5
    figures = dict(f.evidence.figures)
    assert figures["loading_speedup_needed"] > 10  # far past what more workers give
    assert "augmentation on the GPU" in (f.fix or "") and "cheaper" in (f.action or "")


@needs_pair
def test_precision_levers_replay_through_cudnn_side_streams() -> None:
    # cuDNN's FFT convolutions run on its own streams, waiting ~26 µs after the main stream's
    # work; the host runs a step ahead. Replayed, their streams' recorded idle must follow the
    # main stream: measured without the profiler, TF32 saved 53.5 %, bf16 autocast 57.5 %.
    r = analyze(load(CAUSES / "precision_fp32.json.gz"), only=["findings"]).sections["findings"]
    assert isinstance(r, FindingsResult)
    f = r.findings[0]
    assert f.id == "fp32_no_tensor_cores" and f.alone_pct is not None
    for measured in (53.5, 57.5):
        assert measured / 1.5 <= f.alone_pct <= measured * 1.5
