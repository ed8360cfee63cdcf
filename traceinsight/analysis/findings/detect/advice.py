"""Fix texts that depend on what the device can do (from the device model) and on what the
program does (training, inference, decoding: :mod:`..read.workload`), for findings whose catalogue
text assumes a CUDA device or a training loop."""

from __future__ import annotations

from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.read.workload import Workload


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
        "background thread while the GPU runs, precompute what does not change "
        + ("per request" if workload.serving else "between calls")
        + ", or overlap it with queued GPU work."
    )


def sync_advice(workload: Workload) -> str | None:
    """host_sync's fix where there are no losses or metrics to keep on the GPU (None: the
    catalogue's training text)."""
    if not workload.inference:
        return None
    reads = (
        "the engine reads some results back each step by design ("
        + ("sampled tokens, finished requests" if workload.kind == "decode" else "finished requests")
        + "): look for the others"
        if workload.serving
        else "read outputs back once per batch of calls, not per call"
    )
    return (
        "Remove synchronising calls from the loop: " + reads + " (no .item(), .cpu(), .tolist(), "
        "print(tensor) inside the forward), avoid data-dependent shapes (nonzero, boolean-mask "
        "indexing), drop explicit torch.cuda.synchronize(); torch.cuda.set_sync_debug_mode('warn') "
        "points at each one."
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


def preprocessing_advice(workload: Workload, gpu_decode: str) -> str:
    """host_preprocessing's fix: where the input is prepared depends on the program (a training
    loop's batches, an offline inference loop's inputs, a serving engine's requests);
    ``gpu_decode``: the device's image-decoding clause, or ""."""
    if workload.serving:
        return (
            f"Take the preparation of each request's input off the thread that launches {workload.engine or 'the engine'}'s "
            "steps: leave tokenising and image processing to the engine's front-end process, prepare the next "
            "requests' inputs (latents, masks, prompt embeddings) while the GPU runs the current step, do "
            "resize/normalise on the GPU" + gpu_decode + ", and cache what repeats across requests."
        )
    where = "the forward pass" if workload.inference else "the training step"
    between = "between calls" if workload.inference else "between epochs"
    return (
        f"Take the input preparation off the thread that launches {where}. Cheapest first: copy "
        "the raw batch (uint8 images, token ids) from pinned memory with non_blocking=True and do "
        "the resize/normalise on the GPU (torchvision.transforms.v2 on CUDA tensors)"
        + gpu_decode
        + f"; or precompute what does not change {between}; or prepare the next batch in a "
        "background thread, or in DataLoader workers (num_workers=N, pin_memory=True, "
        "persistent_workers=True) — each worker runs torch ops on one thread, so a few workers can "
        "be slower than a main thread that used every core: measure."
    )


# Exposed all-reduces in a trace that cannot tell training from inference (no host ops): the
# fix for each reading, neither assumed.
UNKNOWN_ALLREDUCE_FIX = (
    "The trace cannot tell what these all-reduces are (no host ops recorded). If they reduce a "
    "training step's gradients: let DistributedDataParallel bucket them and overlap them with the "
    "backward pass (bucket_cap_mb, gradient_as_bucket_view=True, static_graph=True). If they are "
    "a forward pass's tensor-parallel all-reduces: fewer tensor-parallel ranks where the model "
    "fits, or the engine's fused or custom all-reduce."
)


def communication_advice(workload: Workload) -> str | None:
    """exposed_communication's fix for a forward-only program, or for one the trace cannot
    classify (None: the training text)."""
    if workload.kind == "unknown":
        return UNKNOWN_ALLREDUCE_FIX
    if not workload.inference:
        return None
    return (
        "Hide or shrink the collectives of the forward pass: fewer tensor-parallel ranks where the "
        "model fits, the engine's fused or custom all-reduce (all-reduce fused with the norm), and "
        "overlap of communication with compute where the engine offers it (sequence or pipeline "
        "parallelism)."
    )
