"""Fix texts that depend on what the device can do (from the device model) and on what the
program does (training, inference, decoding: :mod:`.workload`), for findings whose catalogue
text assumes a CUDA device or a training loop."""

from __future__ import annotations

from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.workload import Workload


def _graphs(model: device_model.DeviceModel) -> str | None:
    """The device's graph feature in words, None where it has none."""
    graphs = model.features.graphs
    if graphs == "cuda_graphs":
        return "CUDA graphs"
    if graphs == "hip_graphs":
        return "HIP graphs (torch.cuda.CUDAGraph on ROCm)"
    return None


def launch_advice(
    model: device_model.DeviceModel, workload: Workload | None = None
) -> tuple[str | None, str | None]:
    """(fix, action) for launch-bound idle; (None, None) where the catalogue's text holds (a
    training or unknown workload on a device whose graphs are CUDA's)."""
    graphs = _graphs(model)
    short = "CUDA graphs" if model.features.graphs == "cuda_graphs" else "HIP graphs"
    if workload is not None and workload.kind == "decode" and workload.serving:
        if graphs is None:
            return (
                f"Keep the engine's batching full: more concurrent requests per step ({workload.engine}: "
                "max_num_seqs / max running requests) so each kernel does more work; device graphs are not "
                "known to exist for this device.",
                "more requests per engine step",
            )
        return (
            f"Keep the engine's {graphs} on and covering the batch sizes it runs ({workload.engine}: no "
            "enforce_eager / disable_cuda_graph, capture sizes up to the running batch), and run more "
            "concurrent requests per step (max_num_seqs / max running requests) so each replay does more "
            "work.",
            f"the engine's {short} for every batch size, more requests per step",
        )
    if workload is not None and workload.kind == "decode":
        if graphs is None:
            return (
                "Cut launches per generated token: fuse the decode step (torch.compile(model) where the "
                "backend supports it) with a static KV cache (Hugging Face: "
                "generate(..., cache_implementation='static')); device graphs are not known to exist for "
                "this device. Larger batches do not shorten a token's latency.",
                "fuse the decode step with a static KV cache",
            )
        return (
            f"Replay each token's forward from {graphs}: torch.compile(model, mode='reduce-overhead') "
            "with a static KV cache (Hugging Face: generate(..., cache_implementation='static') or "
            "generation_config.cache_implementation = 'static'), or torch.cuda.graphs around a decode "
            "step whose cache, positions and mask are preallocated. One replay per token replaces its "
            "hundreds of launches; larger batches do not shorten a token's latency.",
            f"{short} for the decode step (reduce-overhead + static KV cache)",
        )
    if workload is not None and workload.inference:
        batch = (
            "run more requests per engine step"
            if workload.serving
            else "batch more inputs per call where latency allows"
        )
        if graphs is None:
            return (
                f"Cut launches: fuse small ops (torch.compile where the backend supports it), or {batch} "
                "so each kernel does more work; device graphs are not known to exist for this device.",
                "fewer, larger launches: fusion or more inputs per call",
            )
        return (
            f"Cut launches: torch.compile(model, mode='reduce-overhead') to fuse small ops and replay the "
            f"forward from {graphs} (inputs of fixed shapes, or a few shape buckets), or {batch} so each "
            "kernel does more work.",
            f"fewer, larger launches: torch.compile with {short}",
        )
    if model.features.graphs == "cuda_graphs":
        return None, None
    if graphs is not None:
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


def host_work_advice(workload: Workload) -> str | None:
    """host_bound's fix where the program is not a training loop (None: the catalogue's)."""
    if not workload.inference:
        return None
    return (
        "Find what the host does in the named region (profile with with_stack=True, or py-spy) and "
        "take it off the critical path of the forward passes: prepare the next inputs in a "
        "background thread while the GPU runs, precompute what does not change per request, or "
        "overlap it with queued GPU work."
    )


def memory_pressure_advice(workload: Workload) -> str | None:
    """memory_pressure's fix for a forward-only program (None: the catalogue's training text)."""
    if not workload.inference:
        return None
    return (
        "Lower the peak: a smaller batch or maximum sequence length, weights in bf16 (or quantised), "
        "a KV cache in a lower precision or of a fixed size, torch.no_grad()/torch.inference_mode() "
        "around the forward, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
    )


def communication_advice(workload: Workload) -> str | None:
    """exposed_communication's fix for a forward-only program (None: the catalogue's DDP text)."""
    if not workload.inference:
        return None
    return (
        "Hide or shrink the collectives of the forward pass: fewer tensor-parallel ranks where the "
        "model fits, the engine's fused or custom all-reduce (all-reduce fused with the norm), and "
        "overlap of communication with compute where the engine offers it (sequence or pipeline "
        "parallelism)."
    )
