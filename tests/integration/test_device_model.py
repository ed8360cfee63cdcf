"""The device model: vendor, architecture, matrix precisions, peaks and fix texts per device.

Devices with a real trace at hand are built from that trace's ``deviceProperties`` and header
(H200 from the sample traces; A100, H100, MI210, MI300X and MTIA from the third-party traces,
skipped when ``../shared`` is absent); V100, T4 and an unknown part from small dicts written
like Kineto's.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.device import (
    DeviceModel,
    attention_advice,
    build,
    from_meta,
    fused_optimizer_advice,
    graphs_advice,
    matmul_precision_advice,
)
from traceinsight.analysis.device import peaks as devices
from traceinsight.trace.model import DeviceProperties, TraceMeta

ROOT = Path(__file__).resolve().parents[2]
THIRD = ROOT.parent / "shared" / "third_party"


def header(path: Path) -> dict[str, Any]:
    """The trace's top-level keys without its events."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    return {k: v for k, v in data.items() if k != "traceEvents"}


def meta_of(path: Path) -> TraceMeta:
    """A TraceMeta as the loader builds it: deviceProperties entries and the version keys."""
    if not path.exists():
        pytest.skip(f"{path} not available")
    h = header(path)
    props = h.get("deviceProperties") or []
    devs = tuple(
        DeviceProperties(
            id=int(p.get("id", i)),
            name=str(p.get("name", "unknown")),
            total_global_mem_bytes=p.get("totalGlobalMem"),
            num_sms=p.get("numSms"),
            compute_major=p.get("computeMajor"),
            compute_minor=p.get("computeMinor"),
            raw=p,
        )
        for i, p in enumerate(props)
    )
    versions = {k: str(v) for k, v in h.items() if "version" in k.lower() and k != "schemaVersion"}
    return TraceMeta(path=str(path), file_bytes=0, devices=devs, versions=versions)


V100 = {"id": 0, "name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0, "numSms": 80, "totalGlobalMem": 34089730048}
T4 = {"id": 0, "name": "Tesla T4", "computeMajor": 7, "computeMinor": 5, "numSms": 40, "totalGlobalMem": 15843721216}
UNKNOWN = {"id": 0, "name": "Acme Tensor Engine 9000"}


def test_h200_from_sample_trace() -> None:
    m = from_meta(meta_of(ROOT / "sample_traces" / "amp_on.json.gz"), 0)
    assert (m.vendor, m.architecture, m.target, m.compute_capability) == ("nvidia", "hopper", "sm_90", "9.0")
    assert m.part == "h200-sxm"
    assert {"bf16", "fp16", "tf32", "fp8", "int8", "fp64"} <= m.matrix_precisions
    assert "fp4" not in m.matrix_precisions
    assert m.peak_tflops("bf16") == devices.lookup("NVIDIA H200").tflops["bf16"]  # type: ignore[union-attr]
    assert m.peak_tflops("fp32", tensor_core=True) == m.peak_tflops("tf32")
    assert m.peak_tflops("fp64", tensor_core=True) == m.dense_peaks()["fp64_tc"]
    assert m.mem_bw_tbps == 4.8
    assert m.features.sdpa_backends == ("cudnn", "flash", "efficient", "math")
    assert m.features.graphs == "cuda_graphs" and m.features.fused_optimizer is True


def test_a100_from_hta_trace() -> None:
    m = from_meta(meta_of(THIRD / "hta" / "critical_path" / "simple_add_input.json.gz"), 0)
    assert (m.vendor, m.architecture) == ("nvidia", "ampere")
    assert m.part is not None and m.part.startswith("a100")
    assert {"bf16", "tf32", "fp64"} <= m.matrix_precisions
    assert "fp8" not in m.matrix_precisions
    assert "cudnn" not in m.features.sdpa_backends and "flash" in m.features.sdpa_backends
    text = matmul_precision_advice(m)
    assert "bf16 autocast" in text and "set_float32_matmul_precision('high')" in text
    assert "156" in text  # the A100's TF32 dense peak, from the table


def test_h100_from_tracelens_trace() -> None:
    m = from_meta(meta_of(THIRD / "tracelens" / "h100_falconsai_vit.json.gz"), 0)
    assert (m.vendor, m.architecture, m.part) == ("nvidia", "hopper", "h100-sxm")
    assert "fp8" in m.matrix_precisions
    assert "TF32" in matmul_precision_advice(m)


def test_v100_has_fp16_tensor_cores_only() -> None:
    m = build(V100)
    assert (m.vendor, m.architecture, m.target) == ("nvidia", "volta", "sm_70")
    assert m.matrix_precisions == frozenset({"fp16"})
    assert m.has_matrix("bf16") is False and m.has_matrix("tf32") is False
    assert m.peak_tflops("fp16") == 125.0
    text = matmul_precision_advice(m)
    assert "fp16 autocast" in text and "GradScaler" in text
    assert "bf16 autocast" not in text and "set_float32_matmul_precision" not in text
    assert "flash" not in m.features.sdpa_backends and "efficient" in m.features.sdpa_backends


def test_t4_turing() -> None:
    m = build(T4)
    assert (m.architecture, m.part) == ("turing", "t4")
    assert m.matrix_precisions == frozenset({"fp16", "int8"})
    assert "GradScaler" in matmul_precision_advice(m)
    assert m.features.tf32_matmul is False


def test_mi210_is_cdna2_not_hopper() -> None:
    # ROCm reports the gfx target as compute capability 9.0: not Hopper on an AMD part.
    m = from_meta(meta_of(THIRD / "tracelens" / "mi210_gpu_only.json.gz"), 0)
    assert (m.vendor, m.architecture, m.target, m.part) == ("amd", "cdna2", "gfx90a", "mi210")
    assert "tf32" not in m.matrix_precisions and "fp8" not in m.matrix_precisions
    assert "fp64" in m.matrix_precisions
    assert m.features.graphs == "hip_graphs" and m.features.fused_optimizer is True
    assert "cudnn" not in m.features.sdpa_backends
    assert "HIP graphs" in graphs_advice(m)


def test_mi300x_by_name_and_without_one() -> None:
    named = from_meta(meta_of(THIRD / "tracelens" / "mi300_resnet_act_checkpoint.json.gz"), 0)
    assert (named.vendor, named.architecture, named.target, named.part) == ("amd", "cdna3", "gfx942", "mi300x")
    assert {"bf16", "fp8", "fp64"} <= named.matrix_precisions
    text = matmul_precision_advice(named)
    assert "bf16 autocast" in text and "1307.4" in text
    assert "set_float32_matmul_precision" not in text  # TF32 on ROCm is not promised
    # vLLM's traces name no device: ROCm versions, compute capability 9.4 and 304 CUs tell it.
    blank = from_meta(meta_of(THIRD / "tracelens" / "vllm_decode_full" / "graph_execution.json.gz"), 0)
    assert blank.name is None
    assert (blank.vendor, blank.architecture, blank.target, blank.part) == ("amd", "cdna3", "gfx942", "mi300x")
    assert any("ROCm" in e for e in blank.evidence)


def test_mtia_from_hta_trace() -> None:
    m = from_meta(meta_of(THIRD / "hta" / "mtia_inference_rank_0.json.gz"))
    assert m.vendor == "mtia"
    assert m.peaks is None and m.peak_tflops("bf16") is None
    assert m.matrix_precisions == frozenset()
    assert "no peak" in m.describe()
    assert "MTIA" in matmul_precision_advice(m)
    assert m.features.fused_optimizer is None


def test_unknown_device_says_so_and_gives_no_peak_figures() -> None:
    m = build(UNKNOWN)
    assert (m.vendor, m.architecture, m.known) == ("unknown", None, False)
    assert m.peaks is None and m.peak_tflops("bf16") is None and m.mem_bw_tbps is None
    assert m.has_matrix("bf16") is None
    assert "unknown device" in m.describe()
    text = matmul_precision_advice(m)
    assert "not recognised" in text and "TFLOP" not in text
    assert "fused=True" not in fused_optimizer_advice(m)
    assert build(None).vendor == "unknown"


def test_user_overrides_from_toml(tmp_path: Path) -> None:
    toml = tmp_path / "peaks.toml"
    toml.write_text('[device]\nname = "my part"\nbf16_tflops = 100\nmem_bw_tbps = 1.0\n', encoding="utf-8")
    unknown = build(UNKNOWN, config=AnalysisConfig(devices_toml=str(toml)))
    assert unknown.peaks is not None and unknown.peaks.origin == "user"
    assert unknown.peak_tflops("bf16") == 100.0 and unknown.mem_bw_tbps == 1.0
    assert unknown.vendor == "unknown"  # peaks from the user do not make the vendor known
    v100 = build(V100, config=AnalysisConfig(devices_toml=str(toml)))
    assert v100.peaks is not None and v100.peaks.origin == "table+user"
    assert v100.peak_tflops("bf16") == 100.0 and v100.mem_bw_tbps == 1.0
    assert v100.peak_tflops("fp32") == 15.7  # untouched fields keep the table's figure
    cli = build(V100, peak_tflops=50.0)
    assert cli.peak_tflops("fp16") == 50.0


def test_blackwell_and_ada_from_capability() -> None:
    b200 = build({"name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0})
    assert b200.architecture == "blackwell" and "fp4" in b200.matrix_precisions and "fp64" in b200.matrix_precisions
    rtx = build({"name": "NVIDIA GeForce RTX 5090", "computeMajor": 12, "computeMinor": 0})
    assert rtx.architecture == "blackwell" and "fp64" not in rtx.matrix_precisions and rtx.peaks is None
    ada = build({"name": "NVIDIA L4", "computeMajor": 8, "computeMinor": 9})
    assert ada.architecture == "ada" and "fp8" in ada.matrix_precisions and "fp64" not in ada.matrix_precisions
    a10 = build({"name": "NVIDIA A10", "computeMajor": 8, "computeMinor": 6})
    assert "fp64" not in a10.matrix_precisions and "bf16" in a10.matrix_precisions


def test_amd_isa_from_kernel_names_when_nothing_else_tells() -> None:
    names = ["Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_ISA942_gfx942", "triton_poi_fused_0"]
    m = build({"name": "AMD Radeon Graphics"}, kernel_names=names)
    assert (m.vendor, m.target, m.architecture) == ("amd", "gfx942", "cdna3")


def test_fix_texts_and_serialisation() -> None:
    h100 = build({"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0})
    assert "fused=True" in fused_optimizer_advice(h100)
    assert "CUDA graphs" in graphs_advice(h100)
    assert "cudnn" in attention_advice(h100)
    data = h100.to_dict()
    assert data["vendor"] == "nvidia" and data["known"] is True
    assert json.dumps(data)  # JSON-safe
    assert isinstance(DeviceModel().describe(), str)


def test_from_loaded_trace() -> None:
    from traceinsight.analysis.device import from_trace
    from traceinsight.api import load

    m = from_trace(load(ROOT / "sample_traces" / "gemm_bf16.json.gz"))
    assert (m.vendor, m.architecture, m.part) == ("nvidia", "hopper", "h200-sxm")
