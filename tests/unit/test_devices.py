"""Device peak table: name matching, dense figures, sources, fallbacks and user overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.analysis.device.peaks import (
    DTYPE_CLASSES,
    known_devices,
    load_toml,
    lookup,
    resolve,
)
from traceinsight.errors import UsageError


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("Tesla T4", "t4"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2"),
        ("Tesla V100-PCIE-32GB", "v100-pcie"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI250X", "mi250x"),
    ],
)
def test_lookup_matches_device_names(name: str, key: str) -> None:
    peaks = lookup(name)
    assert peaks is not None
    assert peaks.key == key
    assert peaks.complete


def test_unknown_device_has_no_peaks() -> None:
    assert lookup("NVIDIA GeForce RTX 9999") is None
    assert lookup(None) is None
    assert lookup("") is None


def test_dense_figures_and_sources() -> None:
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None
    # Dense BF16 on H100 SXM is ~989 TFLOP/s (1979 is the sparse figure).
    assert h100.peak_tflops("bf16") == pytest.approx(989.5)
    assert h100.mem_bw_tbps == pytest.approx(3.35)
    assert h100.ridge_flop_per_byte("bf16") == pytest.approx(989.5 / 3.35)
    h200 = lookup("NVIDIA H200")
    assert h200 is not None and h200.mem_bw_tbps == pytest.approx(4.8)
    for row in known_devices():
        assert row["source"].startswith(("NVIDIA", "AMD"))
        assert "http" in row["source"]
        assert row["mem_bw_tbps"] > 0
        # Tensor rates exceed the CUDA-core FP32 rate wherever both exist.
        if row.get("bf16") and row.get("fp32"):
            assert row["bf16"] > row["fp32"]


def test_missing_classes_fall_back() -> None:
    t4 = lookup("Tesla T4")
    assert t4 is not None
    assert t4.peak_tflops("bf16") == t4.peak_tflops("fp32")  # no BF16 units on Turing
    assert t4.peak_tflops("tf32") == t4.peak_tflops("fp32")
    a100 = lookup("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.peak_tflops("fp8") == a100.peak_tflops("fp16")
    for cls in DTYPE_CLASSES:
        assert a100.peak_tflops(cls) is not None


def test_command_line_peaks_for_an_unknown_device() -> None:
    peaks = resolve("Mystery Accelerator", peak_tflops=100.0, peak_bw_tbps=2.0)
    assert peaks is not None
    assert peaks.origin == "user"
    assert peaks.peak_tflops("bf16") == 100.0 and peaks.peak_tflops("fp32") == 100.0
    assert peaks.ridge_flop_per_byte("bf16") == pytest.approx(50.0)
    assert resolve("Mystery Accelerator") is None
    # Only a bandwidth: not enough for a roofline.
    partial = resolve("Mystery Accelerator", peak_bw_tbps=1.0)
    assert partial is not None and not partial.complete


def test_overrides_on_a_known_device_keep_the_rest() -> None:
    peaks = resolve("NVIDIA H200", peak_bw_tbps=4.0)
    assert peaks is not None
    assert peaks.origin == "table+user"
    assert peaks.mem_bw_tbps == 4.0
    assert peaks.peak_tflops("bf16") == pytest.approx(989.5)
    assert peaks.sources["mem_bw_tbps"].startswith("user")


def test_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "dev.toml"
    path.write_text('[device]\nname = "My GPU"\nbf16_tflops = 200\nfp32_tflops = 50.5\nmem_bw_tbps = 1.5\n')
    spec = load_toml(path)
    assert spec == {"name": "My GPU", "bf16_tflops": 200, "fp32_tflops": 50.5, "mem_bw_tbps": 1.5}
    peaks = resolve("Unknown", devices_toml=path)
    assert peaks is not None
    assert peaks.name == "My GPU"
    assert peaks.peak_tflops("bf16") == 200 and peaks.peak_tflops("fp16") == 200
    assert peaks.peak_tflops("fp32") == 50.5
    assert peaks.mem_bw_tbps == 1.5


@pytest.mark.parametrize(
    "text",
    [
        "[device]\nbogus_key = 1\n",
        "[device]\nbf16_tflops = -3\n",
        "[device]\nbf16_tflops = 'fast'\n",
        "name = 'no table'\n",
        "[device\n",
    ],
)
def test_bad_toml_files_are_usage_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError):
        load_toml(path)


def test_missing_toml_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        load_toml(tmp_path / "absent.toml")


def test_non_positive_command_line_peaks() -> None:
    with pytest.raises(UsageError):
        resolve("NVIDIA H200", peak_tflops=0)
    with pytest.raises(UsageError):
        resolve("NVIDIA H200", peak_bw_tbps=-1)
