"""Peak dense FLOP/s per dtype and peak memory bandwidth of common accelerators.

Figures are the vendors' published *dense* numbers (sparsity-doubled figures are halved)
for the stock boost clock; each one names the datasheet it comes from. A trace names its
device in ``deviceProperties.name`` (e.g. "NVIDIA H100 80GB HBM3"); :func:`lookup` matches
that name against the patterns below, first match wins, so the more specific patterns
(H100 PCIe, H100 NVL) come before the general ones.

Users with other parts (or other clocks) give their own peaks on the command line or in a
small TOML file (:func:`load_toml`); those replace the table's figures field by field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from traceinsight.errors import UsageError

# Compute classes a kernel's work is costed against, each one a dtype on one path through
# the chip: "fp64" and "fp32" are the vector (CUDA-core / SIMT) rates, "fp64_tc" is FP64 on
# tensor cores (DMMA on A100/H100/H200, FP64 matrix cores on AMD), "tf32" is FP32 data on
# tensor/matrix cores; bf16/fp16/fp8/int8 are their tensor-core rates.
DTYPE_CLASSES = ("fp64", "fp64_tc", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")

# When a part has no figure for a class, the class whose rate its work falls back to.
_FALLBACK = {
    "tf32": "fp32",  # no TF32 tensor cores: FP32 math runs on CUDA cores
    "bf16": "fp32",  # pre-Ampere parts have no BF16 tensor cores
    "fp16": "fp32",
    "fp8": "fp16",  # no FP8 units: FP8 inputs are upcast before the math
    "int8": "fp16",
    "fp64": "fp32",
    "fp64_tc": "fp64",  # no FP64 tensor cores: the kernel cannot have used them
}


def path_class(dtype_class: str, tensor_core: bool) -> str:
    """The compute class of work of ``dtype_class`` run on tensor cores or not.

    FP64 and FP32 have a vector and a tensor-core rate on recent parts (FP64 tensor cores run
    at twice the vector rate on H100/H200, so costing a DMMA kernel at the vector peak reads
    as 200 %). Half and narrower types are costed at their tensor-core rate either way: a
    kernel that misses the tensor cores then reads low, never above its ceiling.
    """
    if tensor_core and dtype_class == "fp64":
        return "fp64_tc"
    if tensor_core and dtype_class == "fp32":
        return "tf32"
    return dtype_class


@dataclass(frozen=True)
class DevicePeaks:
    """Peak dense TFLOP/s per compute class and peak memory bandwidth of one device."""

    key: str
    name: str
    mem_bw_tbps: float | None
    tflops: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    origin: str = "table"  # table | user | table+user
    l2_bytes: int | None = None  # last-level on-chip cache, for the cache-resident check
    matched_by: str | None = None  # how the trace's device was recognised (see match_device)

    def peak_tflops(self, dtype_class: str) -> float | None:
        """Peak for a compute class, following :data:`_FALLBACK` when the part lacks it."""
        seen: set[str] = set()
        cls: str | None = dtype_class
        while cls is not None and cls not in seen:
            value = self.tflops.get(cls)
            if value:
                return value
            seen.add(cls)
            cls = _FALLBACK.get(cls)
        return None

    def ridge_flop_per_byte(self, dtype_class: str) -> float | None:
        peak = self.peak_tflops(dtype_class)
        if not peak or not self.mem_bw_tbps:
            return None
        return peak / self.mem_bw_tbps

    @property
    def complete(self) -> bool:
        """True when both a compute peak and a bandwidth are known (roofline possible)."""
        return bool(self.mem_bw_tbps) and any(self.tflops.values())


@dataclass(frozen=True)
class _Entry:
    key: str
    name: str
    pattern: str
    mem_bw_tbps: float
    tflops: dict[str, float]
    source: str
    l2_mb: float | None = None


_H100_SXM_SRC = "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H100_PCIE_SRC = "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H100_NVL_SRC = "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column), https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200_SRC = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column), https://www.nvidia.com/en-us/data-center/h200/"
_H200_NVL_SRC = "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column), https://www.nvidia.com/en-us/data-center/h200/"
_A100_SRC = "NVIDIA A100 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_A10_SRC = "NVIDIA A10 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"
_L4_SRC = "NVIDIA L4 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
_L40S_SRC = "NVIDIA L40S GPU datasheet, https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_T4_SRC = "NVIDIA T4 Tensor Core GPU datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
_V100_SRC = "NVIDIA Tesla V100 GPU datasheet, https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_B200_SRC = "NVIDIA HGX B200 datasheet (per-GPU = HGX 8-GPU figure / 8), https://www.nvidia.com/en-us/data-center/hgx/"
_MI250X_SRC = "AMD Instinct MI250X accelerator data sheet (per GCD = package figure / 2), https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
_MI250_SRC = "AMD Instinct MI250 accelerator data sheet (per GCD = package figure / 2), https://www.amd.com/en/products/accelerators/instinct/mi200/mi250.html"
_MI210_SRC = "AMD Instinct MI210 accelerator data sheet, https://www.amd.com/en/products/accelerators/instinct/mi200/mi210.html"
_MI300X_SRC = "AMD Instinct MI300X accelerator data sheet, https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html"

# Dense figures in TFLOP/s (TOPS for int8), bandwidth in TB/s. Order: specific before general.
_TABLE: tuple[_Entry, ...] = (
    _Entry("h100-pcie", "H100 PCIe", r"H100.*PCIE", 2.0,
           {"fp64": 26.0, "fp64_tc": 51.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "int8": 1513.0},
           _H100_PCIE_SRC, 50),
    _Entry("h100-nvl", "H100 NVL", r"H100.*NVL", 3.9,
           {"fp64": 30.0, "fp64_tc": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "int8": 1670.5},
           _H100_NVL_SRC, 50),
    _Entry("h100-sxm", "H100 SXM", r"H100", 3.35,
           {"fp64": 34.0, "fp64_tc": 67.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
           _H100_SXM_SRC, 50),
    _Entry("h200-nvl", "H200 NVL", r"H200.*NVL", 4.8,
           {"fp64": 30.0, "fp64_tc": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5, "int8": 1670.5},
           _H200_NVL_SRC, 50),
    _Entry("h200-sxm", "H200 SXM", r"H200", 4.8,
           {"fp64": 34.0, "fp64_tc": 67.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0, "int8": 1979.0},
           _H200_SRC, 50),
    _Entry("a100-80gb-pcie", "A100 80GB PCIe", r"A100.*80\s*GB.*PCIE|A100.*PCIE.*80\s*GB", 1.935,
           {"fp64": 9.7, "fp64_tc": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
           _A100_SRC, 40),
    _Entry("a100-80gb-sxm", "A100 80GB SXM", r"A100.*80\s*GB", 2.039,
           {"fp64": 9.7, "fp64_tc": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
           _A100_SRC, 40),
    _Entry("a100-40gb", "A100 40GB", r"A100", 1.555,
           {"fp64": 9.7, "fp64_tc": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0},
           _A100_SRC, 40),
    _Entry("a10", "A10", r"\bA10\b(?!0)", 0.6,
           {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
           _A10_SRC, 6),
    _Entry("l40s", "L40S", r"\bL40S\b", 0.864,
           {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0},
           _L40S_SRC, 96),
    _Entry("l4", "L4", r"\bL4\b", 0.3,
           {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "int8": 242.5},
           _L4_SRC, 48),
    _Entry("t4", "T4", r"\bT4\b", 0.32,
           {"fp32": 8.1, "fp16": 65.0, "int8": 130.0},
           _T4_SRC, 4),
    _Entry("v100s-pcie", "V100S PCIe", r"V100S", 1.134,
           {"fp64": 8.2, "fp32": 16.4, "fp16": 130.0},
           _V100_SRC, 6),
    _Entry("v100-pcie", "V100 PCIe", r"V100.*PCIE", 0.9,
           {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0},
           _V100_SRC, 6),
    _Entry("v100-sxm2", "V100 SXM2", r"V100", 0.9,
           {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0},
           _V100_SRC, 6),
    _Entry("b200", "B200", r"\bB200\b", 8.0,
           {"fp64": 37.0, "fp64_tc": 37.0, "fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "int8": 4500.0},
           _B200_SRC),
    _Entry("mi300x", "MI300X", r"MI300X", 5.3,
           {"fp64": 81.7, "fp64_tc": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
           _MI300X_SRC, 256),
    # An MI250/MI250X package is two GCDs and PyTorch sees each GCD as one device: the
    # figures are the package's halved. "tf32" here is FP32 on the matrix cores (no TF32).
    _Entry("mi250x", "MI250X (one GCD)", r"MI250X", 1.6384,
           {"fp64": 23.95, "fp64_tc": 47.85, "fp32": 23.95, "tf32": 47.85, "bf16": 191.5, "fp16": 191.5, "int8": 191.5},
           _MI250X_SRC, 8),
    _Entry("mi250", "MI250 (one GCD)", r"MI250(?!X)", 1.6384,
           {"fp64": 22.65, "fp64_tc": 45.25, "fp32": 22.65, "tf32": 45.25, "bf16": 181.0, "fp16": 181.0, "int8": 181.0},
           _MI250_SRC, 8),
    _Entry("mi210", "MI210", r"MI210", 1.6384,
           {"fp64": 22.6, "fp64_tc": 45.3, "fp32": 22.6, "tf32": 45.3, "bf16": 181.0, "fp16": 181.0, "int8": 181.0},
           _MI210_SRC, 8),
)

# TOML keys accepted in a [device] table and the compute class each one sets.
TOML_KEYS = {f"{cls}_tflops": cls for cls in DTYPE_CLASSES} | {"int8_tops": "int8"}


def known_devices() -> list[dict[str, Any]]:
    """The table as plain rows (for docs and ``--format json``)."""
    return [
        {"key": e.key, "name": e.name, "pattern": e.pattern, "mem_bw_tbps": e.mem_bw_tbps, **e.tflops, "source": e.source}
        for e in _TABLE
    ]


def lookup(device_name: str | None) -> DevicePeaks | None:
    """The table entry matching a ``deviceProperties.name``, or None for an unknown part."""
    if not device_name:
        return None
    for entry in _TABLE:
        if re.search(entry.pattern, device_name, flags=re.IGNORECASE):
            sources = {cls: entry.source for cls in entry.tflops} | {"mem_bw_tbps": entry.source}
            return DevicePeaks(
                key=entry.key,
                name=entry.name,
                mem_bw_tbps=entry.mem_bw_tbps,
                tflops=dict(entry.tflops),
                sources=sources,
                origin="table",
                l2_bytes=int(entry.l2_mb * 1024 * 1024) if entry.l2_mb else None,
            )
    return None


# ROCm names some parts generically ("AMD Radeon Graphics" on MI250): the ISA
# (gcnArchName) and the compute-unit count still tell the part. (arch prefix, CUs) → name.
_AMD_ARCH_PARTS: tuple[tuple[str, int | None, str], ...] = (
    ("gfx90a", 110, "AMD Instinct MI250X"),
    ("gfx90a", 104, "AMD Instinct MI250"),  # MI210 has the same per-device figures
    ("gfx942", 304, "AMD Instinct MI300X"),
)


def infer_part_name(name: str | None, raw: dict[str, Any] | None) -> str | None:
    """A table-matchable name for a device whose reported name is generic, else None.

    Uses ROCm's ``gcnArchName`` and the CU count (``numSms`` / ``multiProcessorCount``).
    MI300X and MI325X share gfx942 and 304 CUs; only the former's 192 GB fits below 200 GB.
    """
    if lookup(name) is not None or not raw:
        return None
    arch = str(raw.get("gcnArchName") or "").split(":")[0].lower()
    cus = raw.get("numSms", raw.get("multiProcessorCount"))
    mem = raw.get("totalGlobalMem")
    for prefix, want_cus, part in _AMD_ARCH_PARTS:
        if arch != prefix or (want_cus is not None and cus != want_cus):
            continue
        if prefix == "gfx942" and isinstance(mem, (int, float)) and mem > 200 * 1024**3:
            return None
        return part
    return None


def match_device(
    device_index: int, devices: Sequence[Any], work_devices: Sequence[int]
) -> tuple[Any | None, str | None]:
    """The ``deviceProperties`` entry describing the device kernels ran on, and how it was found.

    ``devices`` are the trace's entries (with ``id``, ``name`` and ``raw``); ``work_devices``
    the distinct device indices GPU work ran on. Kineto on ROCm lists ``id`` 0 while kernels
    carry pid 2 (the HIP device as seen by the process), so after the exact id this tries the
    entry whose ``raw`` names the same pid, then the same position among the devices that ran
    work, then the only entry, then entries that all name one part.
    """
    for dev in devices:
        if dev.id == device_index:
            return dev, "id"
    for dev in devices:
        raw = getattr(dev, "raw", None) or {}
        if raw.get("pid") == device_index or raw.get("deviceId") == device_index:
            return dev, "pid"
    ordered = sorted(set(work_devices))
    if device_index in ordered and len(ordered) <= len(devices):
        return sorted(devices, key=lambda d: d.id)[ordered.index(device_index)], "position"
    if len(devices) == 1:
        return devices[0], "only entry"
    names = {d.name for d in devices}
    if len(names) == 1 and devices:
        return devices[0], "name (all entries name one part)"
    return None, None


def load_toml(path: str | Path) -> dict[str, Any]:
    """The ``[device]`` table of a peaks file, validated: name plus *_tflops / mem_bw_tbps."""
    try:
        import tomllib as toml_reader  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as toml_reader  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ModuleNotFoundError as exc:
            raise UsageError(
                "reading a devices TOML file needs Python 3.11+ or the 'tomli' package"
            ) from exc
    file_path = Path(path)
    try:
        data = toml_reader.loads(file_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read devices file {file_path}: {exc}") from exc
    except toml_reader.TOMLDecodeError as exc:
        raise UsageError(f"{file_path}: not valid TOML ({exc})") from exc
    device = data.get("device")
    if not isinstance(device, dict):
        raise UsageError(f"{file_path}: expected a [device] table with name, bf16_tflops, fp32_tflops, mem_bw_tbps")
    allowed = {"name", "mem_bw_tbps", *TOML_KEYS}
    unknown = sorted(set(device) - allowed)
    if unknown:
        raise UsageError(f"{file_path}: unknown key(s) in [device]: {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    for key, value in device.items():
        if key == "name":
            if not isinstance(value, str):
                raise UsageError(f"{file_path}: [device] name must be a string")
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise UsageError(f"{file_path}: [device] {key} must be a positive number")
    return dict(device)


def resolve(
    device_name: str | None,
    *,
    peak_tflops: float | None = None,
    peak_bw_tbps: float | None = None,
    devices_toml: str | Path | None = None,
) -> DevicePeaks | None:
    """Peaks for a device: the table's, with the user's figures laid over them.

    ``peak_tflops`` (one figure) is used for every compute class, since a user who gives a
    single number means "the rate my kernels can reach"; a TOML file sets classes one by one.
    Returns None when neither the table nor the user knows anything about the device.
    """
    base = lookup(device_name)
    overrides: dict[str, float] = {}
    bw: float | None = None
    label: str | None = None
    if devices_toml is not None:
        spec = load_toml(devices_toml)
        label = spec.get("name")
        bw = float(spec["mem_bw_tbps"]) if "mem_bw_tbps" in spec else None
        for key, cls in TOML_KEYS.items():
            if key in spec:
                overrides[cls] = float(spec[key])
        # bf16 and fp16 share tensor-core rates on every part in the table.
        if "bf16" in overrides and "fp16" not in overrides:
            overrides["fp16"] = overrides["bf16"]
        if "fp16" in overrides and "bf16" not in overrides:
            overrides["bf16"] = overrides["fp16"]
    if peak_tflops is not None:
        if peak_tflops <= 0:
            raise UsageError("--peak-tflops must be positive")
        overrides = dict.fromkeys(DTYPE_CLASSES, float(peak_tflops))
    if peak_bw_tbps is not None:
        if peak_bw_tbps <= 0:
            raise UsageError("--peak-bw must be positive")
        bw = float(peak_bw_tbps)
    if not overrides and bw is None:
        return base
    user_src = f"user ({devices_toml})" if devices_toml is not None else "user (command line)"
    if base is None:
        return DevicePeaks(
            key="user",
            name=label or device_name or "unknown device",
            mem_bw_tbps=bw,
            tflops=overrides,
            sources=dict.fromkeys(overrides, user_src) | ({"mem_bw_tbps": user_src} if bw else {}),
            origin="user",
        )
    sources = dict(base.sources) | dict.fromkeys(overrides, user_src)
    if bw is not None:
        sources["mem_bw_tbps"] = user_src
    return replace(
        base,
        name=label or base.name,
        mem_bw_tbps=bw if bw is not None else base.mem_bw_tbps,
        tflops=base.tflops | overrides,
        sources=sources,
        origin="table+user",
    )
