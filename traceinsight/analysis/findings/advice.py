"""Fix texts that depend on what the device can do (from the device model), for findings
whose catalogue text assumes a CUDA device."""

from __future__ import annotations

from traceinsight.analysis.device import model as device_model


def launch_advice(model: device_model.DeviceModel) -> tuple[str | None, str | None]:
    """(fix, action) for launch-bound idle; (None, None) where the catalogue's CUDA-graphs
    text holds (an NVIDIA device, or one whose graphs support is CUDA's)."""
    graphs = model.features.graphs
    if graphs == "cuda_graphs":
        return None, None
    if graphs == "hip_graphs":
        return (
            "Cut launches: torch.compile(model) to fuse small ops, HIP graphs (torch.cuda.CUDAGraph on "
            "ROCm: torch.compile(mode='reduce-overhead') or torch.cuda.graphs), or larger batches so "
            "each kernel does more work.",
            "fewer, larger launches: torch.compile or HIP graphs",
        )
    return (
        "Cut launches: fuse small ops (torch.compile where the backend supports it) or use larger "
        "batches so each kernel does more work; device graphs are not known to exist for this device"
        + (f" ({model.name})" if model.name else "")
        + ".",
        "fewer, larger launches: fusion or larger batches",
    )
