"""What this GPU can do: vendor, architecture, precisions with tensor/matrix cores, dense peaks,
memory bandwidth and the PyTorch features that exist for it, plus fix texts built from them.

Built from the trace's ``deviceProperties`` (name, compute capability, ``gcnArchName``, CU
count), the runtime versions in its header (``cuda_runtime_version`` vs ``roctracer_version``)
and, as a last resort, the ISA in kernel names. Peaks come from the table in
:mod:`traceinsight.analysis.device.peaks` with the user's overrides (``--peak-tflops``,
``--peak-bw``, ``devices_toml``) laid over them; this module adds no figures of its own.

ROCm reports the gfx target as a "compute capability" (MI300X: 9.4, MI210: 9.0), so the vendor
is decided before the capability is read: 9.0 is Hopper only on an NVIDIA device.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.device import infer as device_infer
from traceinsight.analysis.device import peaks as devices

if TYPE_CHECKING:
    from traceinsight.analysis.core.base import AnalysisConfig
    from traceinsight.trace.model import DeviceProperties, Trace, TraceMeta

VENDORS = ("nvidia", "amd", "intel", "mtia", "unknown")

# NVIDIA architecture by compute capability (major, minor); a major alone covers the rest.
_NVIDIA_ARCH: dict[tuple[int, int | None], str] = {
    (6, None): "pascal",
    (7, 0): "volta",
    (7, 2): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 7): "ampere",
    (8, 9): "ada",
    (9, 0): "hopper",
    (10, None): "blackwell",
    (11, None): "blackwell",
    (12, None): "blackwell",
}
# AMD: gfx target → architecture; names → gfx target where the trace gives no target.
_AMD_ARCH: dict[str, str] = {
    "gfx908": "cdna1",
    "gfx90a": "cdna2",
    "gfx940": "cdna3",
    "gfx941": "cdna3",
    "gfx942": "cdna3",
    "gfx950": "cdna4",
    "gfx1100": "rdna3",
    "gfx1101": "rdna3",
    "gfx1102": "rdna3",
    "gfx1200": "rdna4",
    "gfx1201": "rdna4",
}
_AMD_NAME_GFX: tuple[tuple[str, str], ...] = (
    (r"MI35\dX?", "gfx950"),
    (r"MI300|MI325", "gfx942"),
    (r"MI2[15]0", "gfx90a"),
    (r"MI100", "gfx908"),
)
# ROCm's (computeMajor, computeMinor) where no gcnArchName is given. 9.0 spans gfx900..gfx90a,
# so it decides nothing without a name.
_AMD_CC_GFX: dict[tuple[int, int], str] = {(9, 4): "gfx942", (9, 5): "gfx950"}

# Precisions with tensor/matrix-core paths, per architecture (hardware, not software support).
# "fp64" here means FP64 matrix math (DMMA on A100/H100/B200, FP64 MFMA on CDNA2+).
_MATRIX: dict[str, frozenset[str]] = {
    "pascal": frozenset(),
    "volta": frozenset({"fp16"}),
    "turing": frozenset({"fp16", "int8"}),
    "ampere": frozenset({"fp16", "bf16", "tf32", "int8"}),  # + fp64 on sm_80
    "ada": frozenset({"fp16", "bf16", "tf32", "int8", "fp8"}),
    "hopper": frozenset({"fp16", "bf16", "tf32", "int8", "fp8", "fp64"}),
    "blackwell": frozenset({"fp16", "bf16", "tf32", "int8", "fp8", "fp4", "fp64"}),
    "cdna1": frozenset({"fp16", "bf16", "int8", "fp32"}),
    "cdna2": frozenset({"fp16", "bf16", "int8", "fp32", "fp64"}),
    "cdna3": frozenset({"fp16", "bf16", "tf32", "int8", "fp8", "fp32", "fp64"}),
    "cdna4": frozenset({"fp16", "bf16", "int8", "fp8", "fp4", "fp32", "fp64"}),
    "rdna3": frozenset({"fp16", "bf16", "int8"}),
    "rdna4": frozenset({"fp16", "bf16", "int8", "fp8"}),
    "xe-hpc": frozenset({"fp16", "bf16", "tf32", "int8"}),
}
# FP64 matrix math: on the data-center Ampere part (sm_80, added below), Hopper and
# data-center Blackwell; not on consumer Blackwell (sm_12x).
_NO_FP64_MATRIX_CC = {(12, 0), (12, 1)}

_NVIDIA_NAME = re.compile(r"(?i)nvidia|tesla|geforce|quadro|\brtx\b|\b[ABHLTV]\d{1,3}\b|\bGB?\d{3}\b|\bB[12]00\b")
_AMD_NAME = re.compile(r"(?i)\bamd\b|instinct|radeon|\bMI\d{3}")
_INTEL_NAME = re.compile(r"(?i)intel|data center gpu max|\barc\b|ponte vecchio")
_MTIA_NAME = re.compile(r"(?i)\bmtia\b|artemis|freya")


@dataclass(frozen=True)
class Features:
    """PyTorch features that exist for this device (None: not known)."""

    fused_optimizer: bool | None = None  # torch.optim.AdamW(..., fused=True) and friends
    graphs: str | None = None  # "cuda_graphs" / "hip_graphs" (both via torch.cuda.CUDAGraph)
    sdpa_backends: tuple[str, ...] = ()  # of scaled_dot_product_attention: flash, efficient, cudnn, math
    tf32_matmul: bool | None = None  # torch.set_float32_matmul_precision('high') uses TF32 tensor cores
    autocast_device: str | None = None  # device_type for torch.autocast


@dataclass(frozen=True)
class DeviceModel:
    """What the device the kernels ran on can do, and how that was decided (``evidence``)."""

    vendor: str = "unknown"
    name: str | None = None
    architecture: str | None = None
    target: str | None = None  # "sm_90", "gfx942"
    compute_capability: str | None = None
    part: str | None = None  # the peak table's part ("h100-sxm"), when recognised
    matrix_precisions: frozenset[str] = frozenset()
    peaks: devices.DevicePeaks | None = None
    features: Features = field(default_factory=Features)
    evidence: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """True when the vendor and architecture were recognised."""
        return self.vendor != "unknown" and self.architecture is not None

    @property
    def mem_bw_tbps(self) -> float | None:
        return self.peaks.mem_bw_tbps if self.peaks else None

    def peak_tflops(self, precision: str, tensor_core: bool = True) -> float | None:
        """Dense peak for work of ``precision`` (fp64/fp32/tf32/bf16/fp16/fp8/int8), on the
        tensor/matrix-core path when ``tensor_core`` and the part has one; None when unknown."""
        if self.peaks is None:
            return None
        cls = devices.path_class(precision, tensor_core) if precision in ("fp32", "fp64") else precision
        return self.peaks.peak_tflops(cls)

    def dense_peaks(self) -> dict[str, float]:
        """The peaks the table (or the user) states, per compute class, without fallbacks."""
        return dict(self.peaks.tflops) if self.peaks else {}

    def has_matrix(self, precision: str) -> bool | None:
        """Whether ``precision`` has a tensor/matrix-core path here (None: device unknown)."""
        if not self.known:
            return None
        return precision in self.matrix_precisions

    def describe(self) -> str:
        """One line for reports."""
        if self.vendor == "unknown" and self.peaks is None:
            what = self.name or "unrecognised device"
            return f"{what}: unknown device, no peak-based figures"
        if self.peaks is None:
            arch = self.architecture or "unknown architecture"
            return f"{self.name or self.vendor}: {self.vendor} {arch}, no peak-based figures"
        arch = f"{self.architecture}" + (f" ({self.target})" if self.target else "")
        peaks = ""
        if self.peaks is not None:
            bf16 = self.peaks.tflops.get("bf16")
            bw = self.peaks.mem_bw_tbps
            bits = [f"bf16 {bf16:g} TFLOP/s" if bf16 else "", f"{bw:g} TB/s" if bw else ""]
            peaks = ", " + ", ".join(b for b in bits if b) if any(bits) else ""
        return f"{self.name or self.part or 'device'}: {self.vendor} {arch}{peaks}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["matrix_precisions"] = sorted(self.matrix_precisions)
        data["features"]["sdpa_backends"] = list(self.features.sdpa_backends)
        data["evidence"] = list(self.evidence)
        data["known"] = self.known
        return data


# ---- building ---------------------------------------------------------------------------


def _vendor(name: str, raw: Mapping[str, Any], versions: Mapping[str, Any]) -> tuple[str, str | None]:
    if _MTIA_NAME.search(name):
        return "mtia", f"device name {name!r}"
    if raw.get("gcnArchName"):
        return "amd", f"gcnArchName {raw.get('gcnArchName')!r}"
    if _AMD_NAME.search(name):
        return "amd", f"device name {name!r}"
    if _INTEL_NAME.search(name):
        return "intel", f"device name {name!r}"
    if _NVIDIA_NAME.search(name):
        return "nvidia", f"device name {name!r}"
    keys = {k.lower() for k in versions}
    if any(k.startswith(("roctracer", "hip_", "rocm")) for k in keys):
        return "amd", "ROCm runtime versions in the trace header"
    if any(k.startswith(("cuda_", "cupti")) for k in keys):
        return "nvidia", "CUDA runtime versions in the trace header"
    if any("xpu" in k or "sycl" in k or "level_zero" in k for k in keys):
        return "intel", "XPU runtime versions in the trace header"
    return "unknown", None


def _nvidia_arch(major: int | None, minor: int | None) -> str | None:
    if major is None:
        return None
    return _NVIDIA_ARCH.get((major, minor)) or _NVIDIA_ARCH.get((major, None))


def _amd_target(name: str, raw: Mapping[str, Any], major: int | None, minor: int | None) -> tuple[str | None, str | None]:
    arch = str(raw.get("gcnArchName") or "").split(":")[0].lower()
    if arch:
        return arch, "gcnArchName"
    for pattern, gfx in _AMD_NAME_GFX:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return gfx, f"device name {name!r}"
    if major is not None and minor is not None and (major, minor) in _AMD_CC_GFX:
        return _AMD_CC_GFX[(major, minor)], f"ROCm compute capability {major}.{minor}"
    return None, None


def _features(vendor: str, arch: str | None, major: int | None) -> Features:
    if vendor == "nvidia":
        sdpa = ["efficient", "math"]
        if major is not None and major >= 8:
            sdpa.insert(0, "flash")
        if major is not None and major >= 9:
            sdpa.insert(0, "cudnn")
        return Features(
            fused_optimizer=True,
            graphs="cuda_graphs",
            sdpa_backends=tuple(sdpa),
            tf32_matmul=(major is not None and major >= 8),
            autocast_device="cuda",
        )
    if vendor == "amd":
        data_center = arch in ("cdna2", "cdna3", "cdna4")
        return Features(
            fused_optimizer=True,
            graphs="hip_graphs",
            sdpa_backends=("flash", "efficient", "math") if data_center else ("math",),
            tf32_matmul=None,  # xf32 exists on CDNA3, its use by PyTorch depends on the build
            autocast_device="cuda",  # ROCm builds use the "cuda" device type
        )
    if vendor == "intel":
        return Features(sdpa_backends=("math",), autocast_device="xpu")
    return Features()


def _lookup_name(name: str, vendor: str, target: str | None, raw: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """A name the peak table matches, and how it was found."""
    if devices.lookup(name) is not None:
        return name, None
    if vendor == "amd" and target:
        part = devices.infer_part_name(name, {**raw, "gcnArchName": target})
        if part:
            return part, f"part inferred as {part} from {target} (gcnArchName and CU count)"
    return None, None


def build(
    props: DeviceProperties | Mapping[str, Any] | None,
    *,
    versions: Mapping[str, Any] | None = None,
    kernel_names: pl.Series | Sequence[str] | None = None,
    config: AnalysisConfig | None = None,
    peak_tflops: float | None = None,
    peak_bw_tbps: float | None = None,
    devices_toml: str | None = None,
) -> DeviceModel:
    """The model of one device from its ``deviceProperties`` entry (a ``DeviceProperties`` or
    the raw dict), the trace header's version keys, and the user's overrides (``config`` or
    the keyword arguments). ``kernel_names`` help only where the device names no part
    (the ISA in AMD kernel names)."""
    raw: Mapping[str, Any]
    if props is None:
        raw = {}
    elif isinstance(props, Mapping):
        raw = props
    else:
        raw = props.raw or {
            "name": props.name,
            "computeMajor": props.compute_major,
            "computeMinor": props.compute_minor,
            "numSms": props.num_sms,
            "totalGlobalMem": props.total_global_mem_bytes,
        }
    # The parsed entry's name first (it is what the rest of the analyses show), then the raw one.
    parsed_name = getattr(props, "name", "") if props is not None and not isinstance(props, Mapping) else ""
    name = str(parsed_name or raw.get("name") or "")
    major = raw.get("computeMajor")
    minor = raw.get("computeMinor")
    major = major if isinstance(major, int) and not isinstance(major, bool) else None
    minor = minor if isinstance(minor, int) and not isinstance(minor, bool) else None
    if config is not None:
        peak_tflops = peak_tflops if peak_tflops is not None else config.peak_tflops
        peak_bw_tbps = peak_bw_tbps if peak_bw_tbps is not None else config.peak_bw_tbps
        devices_toml = devices_toml if devices_toml is not None else config.devices_toml
    evidence: list[str] = []
    vendor, why = _vendor(name, raw, versions or {})
    if why:
        evidence.append(f"vendor {vendor}: {why}")
    arch: str | None = None
    target: str | None = None
    cc = f"{major}.{minor}" if major is not None and minor is not None else None
    matrix: frozenset[str] = frozenset()
    names_series = None
    if kernel_names is not None:
        names_series = kernel_names if isinstance(kernel_names, pl.Series) else pl.Series(list(kernel_names), dtype=pl.String)
    how_cc = f"compute capability {cc}"
    if vendor in ("nvidia", "unknown") and major is None:
        # No capability in the trace: from the part's name, else (a lower bound) from the
        # SM the kernels were built for.
        by_name = device_infer.nvidia_cc_from_name(name) if vendor == "nvidia" else None
        by_kernels = device_infer.nvidia_cc_from_kernel_names(names_series) if by_name is None and names_series is not None else None
        if by_name or by_kernels:
            major, minor = by_name or by_kernels  # type: ignore[misc]
            how_cc = f"compute capability {major}.{minor} from the device name" if by_name else f"kernels built for sm_{major}{minor} (at least that architecture)"
            if vendor == "unknown":
                vendor = "nvidia"
                evidence.append("vendor nvidia: kernel names built for an NVIDIA SM")
    if vendor == "nvidia":
        arch = _nvidia_arch(major, minor)
        if arch:
            target = f"sm_{major}{minor}"
            evidence.append(f"architecture {arch}: {how_cc}")
            matrix = _MATRIX.get(arch, frozenset())
            if (major, minor) == (8, 0):
                matrix = matrix | {"fp64"}  # A100 (sm_80) has DMMA; sm_86/87 do not
            if (major, minor) in _NO_FP64_MATRIX_CC:
                matrix = matrix - {"fp64"}
    elif vendor == "amd":
        target, how = _amd_target(name, raw, major, minor)
        if target is None and names_series is not None:
            names = names_series
            guess = device_infer.part_from_kernel_names(names)
            counts = device_infer.isa_counts(names)
            if counts.height == 1:
                target, how = str(counts["isa"][0]), "the ISA in kernel names"
            if guess is not None:
                evidence.append(f"part inferred as {guess.part} from {guess.source}")
        arch = _AMD_ARCH.get(target or "")
        if arch:
            evidence.append(f"architecture {arch}: {target} from {how}")
            matrix = _MATRIX.get(arch, frozenset())
    elif vendor == "intel":
        if re.search(r"(?i)max|ponte vecchio|pvc", name):
            arch, target = "xe-hpc", "pvc"
            matrix = _MATRIX[arch]
            evidence.append(f"architecture xe-hpc: device name {name!r}")
    elif vendor == "mtia":
        arch = "mtia"
        evidence.append("MTIA device: no peak table, tensor-core use unknown")
    lookup, how_part = _lookup_name(name, vendor, target, raw)
    if how_part:
        evidence.append(how_part)
    peaks = devices.resolve(lookup or (name or None), peak_tflops=peak_tflops, peak_bw_tbps=peak_bw_tbps, devices_toml=devices_toml)
    if peaks is None:
        evidence.append("no peak figures: the part is not in the peak table and no user peaks were given")
    else:
        evidence.append(f"peaks: {peaks.name} ({peaks.origin})")
    return DeviceModel(
        vendor=vendor,
        name=name or None,
        architecture=arch,
        target=target,
        compute_capability=cc if vendor in ("nvidia", "amd") else None,
        part=peaks.key if peaks is not None and peaks.origin != "user" else None,
        matrix_precisions=matrix,
        peaks=peaks,
        features=_features(vendor, arch, major),
        evidence=tuple(evidence),
    )


def from_meta(
    meta: TraceMeta,
    device: int | None = None,
    *,
    kernel_names: pl.Series | Sequence[str] | None = None,
    config: AnalysisConfig | None = None,
    work_devices: Sequence[int] = (),
) -> DeviceModel:
    """The model of ``device`` (a GPU index as in kernel events) of a loaded trace; the first
    ``deviceProperties`` entry when ``device`` is None."""
    props: DeviceProperties | None = None
    if meta.devices:
        if device is None:
            props = meta.devices[0]
        else:
            props, _ = devices.match_device(device, meta.devices, list(work_devices) or [device])
    return build(props, versions=meta.versions, kernel_names=kernel_names, config=config)


def from_trace(trace: Trace, config: AnalysisConfig | None = None, device: int | None = None) -> DeviceModel:
    """The model of the device that ran the most GPU time in ``trace`` (or of ``device``)."""
    return per_trace(trace, ("device_model", config, device), lambda: _from_trace(trace, config, device))


def _from_trace(trace: Trace, config: AnalysisConfig | None, device: int | None) -> DeviceModel:
    k = trace.kernels
    gpu = k.filter(pl.col("device").is_not_null()) if "device" in k.columns else k.head(0)
    if device is None and gpu.height:
        busiest = gpu.group_by("device").agg(pl.col("dur_ns").sum()).sort(["dur_ns", "device"], descending=[True, False])
        device = int(busiest["device"][0])
    names = gpu["name"].cast(pl.String) if gpu.height else None
    work = [int(d) for d in gpu["device"].unique().to_list()] if gpu.height else []
    return from_meta(trace.meta, device, kernel_names=names, config=config, work_devices=work)


# ---- fix texts ---------------------------------------------------------------------------


def _tf(value: float | None) -> str:
    return f"{value:g} TFLOP/s" if value else "?"


def matmul_precision_advice(model: DeviceModel) -> str:
    """How to move fp32 (or fp64) matmuls onto this device's tensor/matrix cores."""
    p = model.peaks
    fp32 = p.tflops.get("fp32") if p else None
    if model.vendor == "nvidia" and model.known:
        if "bf16" in model.matrix_precisions:
            figures = f" (dense peaks: bf16 {_tf(p.tflops.get('bf16'))}, TF32 {_tf(p.tflops.get('tf32'))}, fp32 {_tf(fp32)})" if p else ""
            return (
                "Use bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16)), or keep fp32 and let "
                f"matmuls use TF32 tensor cores with torch.set_float32_matmul_precision('high'){figures}."
            )
        if "fp16" in model.matrix_precisions:
            figures = f" (dense peaks: fp16 {_tf(p.tflops.get('fp16'))}, fp32 {_tf(fp32)})" if p else ""
            return (
                "Use fp16 autocast with a GradScaler (torch.autocast('cuda', dtype=torch.float16) and "
                f"torch.amp.GradScaler('cuda') for training): {model.architecture} has fp16 tensor cores "
                f"but no TF32 or bf16 ones{figures}."
            )
        return f"{model.architecture} has no tensor cores: reduced precision saves memory traffic but no matmul throughput."
    if model.vendor == "amd" and model.known:
        figures = f" (dense peaks: bf16 {_tf(p.tflops.get('bf16'))}, fp32 {_tf(fp32)})" if p else ""
        if "bf16" in model.matrix_precisions:
            return (
                "Use bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16); ROCm uses the 'cuda' "
                f"device type) to run matmuls on the matrix cores{figures}. TF32 is not suggested: "
                "whether PyTorch uses xf32 on this part depends on the ROCm build."
            )
    if model.vendor == "intel":
        return "Use bf16 autocast (torch.autocast('xpu', dtype=torch.bfloat16)) to run matmuls on the XMX engines."
    if model.vendor == "mtia":
        return (
            "Run matmuls in the reduced precision the MTIA compiler supports for this model (bf16/fp16, "
            "or int8/fp8 quantization for inference); no peak figures are known for MTIA."
        )
    return (
        "Use reduced-precision matmuls where the model tolerates them: bf16 autocast where the device "
        "supports it, fp16 with a GradScaler otherwise. The device is not recognised, so no "
        "peak-based gain is given."
    )


def fused_optimizer_advice(model: DeviceModel) -> str:
    """How to collapse the optimizer's per-parameter kernels."""
    if model.features.fused_optimizer:
        return (
            "Construct the optimizer with fused=True (e.g. torch.optim.AdamW(params, lr, fused=True)): "
            "one kernel per step instead of several per parameter group."
        )
    return (
        "Use the optimizer's foreach implementation (foreach=True) to batch its per-parameter kernels; "
        "a fused implementation is not known to exist for this device."
    )


def graphs_advice(model: DeviceModel) -> str:
    """How to remove per-kernel launch overhead."""
    if model.features.graphs in ("cuda_graphs", "hip_graphs"):
        kind = "CUDA graphs" if model.features.graphs == "cuda_graphs" else "HIP graphs (torch.cuda.CUDAGraph on ROCm)"
        return f"Capture the steady-state step in {kind}: torch.compile(mode='reduce-overhead') or torch.cuda.graphs."
    return "Fuse small kernels (torch.compile) to cut launches; device graphs are not known to exist for this device."


def attention_advice(model: DeviceModel) -> str:
    """Which scaled_dot_product_attention backend to use."""
    backends = model.features.sdpa_backends
    if "flash" in backends or "cudnn" in backends:
        fast = [b for b in ("cudnn", "flash", "efficient") if b in backends]
        return (
            "Use torch.nn.functional.scaled_dot_product_attention with bf16/fp16 inputs so it can pick "
            f"a fused backend ({', '.join(fast)} on this device) instead of separate matmul and softmax kernels."
        )
    if "efficient" in backends:
        return "Use torch.nn.functional.scaled_dot_product_attention: its memory-efficient backend fuses attention on this device."
    return "Use torch.nn.functional.scaled_dot_product_attention; which fused backends exist for this device is not known."
