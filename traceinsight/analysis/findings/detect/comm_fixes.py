"""Fix texts of the communication findings: by collective kind and by the framework that
issued the collectives (DDP, FSDP, TorchRec, a mixture-of-experts layer), so that an
all-to-all never gets DDP's bucket settings and an FSDP all-gather never gets DDP's."""

from __future__ import annotations

import polars as pl

# ---- fix texts --------------------------------------------------------------------------

_DDP_FIX = (
    "DDP already buckets the gradient all-reduce; let the buckets overlap the backward pass: "
    "DDP(model, bucket_cap_mb=...) (smaller buckets start sooner, larger ones cut per-call "
    "latency), gradient_as_bucket_view=True, static_graph=True, no host synchronisation between "
    "backward and optimizer.step; with gradient accumulation, skip the all-reduce on all but the "
    "last micro-batch with model.no_sync()."
)
_MANUAL_ALLREDUCE_FIX = (
    "Reduce the gradients during the backward pass, not after it: wrap the model in "
    "DistributedDataParallel(model, bucket_cap_mb=25, gradient_as_bucket_view=True), which "
    "all-reduces each bucket as soon as its gradients are ready; with gradient accumulation, "
    "reduce on the last micro-batch only (model.no_sync())."
)
_FSDP_FIX = (
    "Give FSDP's all-gathers and reduce-scatters compute to hide behind: "
    "FSDP(..., forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE, "
    "limit_all_gathers=True); with fully_shard (FSDP2), reshard_after_forward=False on the last "
    "blocks (no all-gather for them in backward, at the cost of memory) and explicit prefetch "
    "(set_modules_to_forward_prefetch / set_modules_to_backward_prefetch); wrap blocks large "
    "enough that each one's compute covers the next one's gather."
)
_GATHER_FIX = (
    "Issue the gathers/reductions asynchronously (async_op=True) ahead of where their result is "
    "needed and wait just before use, so the preceding compute hides them; gather into one flat "
    "buffer (all_gather_into_tensor, reduce_scatter_tensor) rather than many small calls."
)
_GENERIC_FIX = (
    "Overlap the collectives with compute: issue them with async_op=True as soon as their input "
    "is ready and wait only where the result is used; fewer, larger calls cut per-call latency."
)
_TORCHREC_FIX = (
    "Overlap the embedding all-to-all with the dense part of the model: pipeline the sparse "
    "stage (TorchRec's TrainPipelineSparseDist runs batch i+1's input distribution and "
    "embedding lookup while batch i's dense forward/backward computes), and fuse the per-table "
    "all-to-alls into one per step (group tables on the same sharding)."
)
_MOE_FIX = (
    "Overlap the expert all-to-all (token dispatch and combine) with compute: split the batch "
    "into chunks and dispatch chunk k+1 while the experts run chunk k, or overlap it with the "
    "attention/shared-expert compute of the same layer."
)
_ALL_TO_ALL_FIX = (
    "Overlap the all-to-all with dense compute: for embedding tables, pipeline the embedding "
    "lookup of the next batch with the dense part of this one (TorchRec's "
    "TrainPipelineSparseDist); for mixture-of-experts layers, chunk the batch and dispatch one "
    "chunk while the experts compute the previous one. DDP bucket settings do not apply here."
)


def exposed_fix(collective: str | None, frameworks: frozenset[str]) -> tuple[str, str]:
    """(fix, action) for exposed collectives of this kind, issued under these frameworks."""
    if collective in ("allgather", "reduce_scatter") and "fsdp" in frameworks:
        return _FSDP_FIX, "FSDP prefetch (forward_prefetch, backward_prefetch, limit_all_gathers)"
    if collective == "allreduce" and "ddp" in frameworks:
        return _DDP_FIX, "let DDP's buckets overlap backward (bucket_cap_mb, static_graph, no_sync)"
    if collective == "allreduce":
        return _MANUAL_ALLREDUCE_FIX, "DDP (bucketed all-reduce during backward)"
    if collective in ("allgather", "reduce_scatter"):
        return _GATHER_FIX, "async gathers issued ahead of use"
    return _GENERIC_FIX, "async collectives overlapped with compute"


def all_to_all_fix(frameworks: frozenset[str]) -> tuple[str, str]:
    if "torchrec" in frameworks:
        return _TORCHREC_FIX, "pipeline the embedding all-to-all (TrainPipelineSparseDist)"
    if "moe" in frameworks:
        return _MOE_FIX, "overlap the expert all-to-all with compute"
    return _ALL_TO_ALL_FIX, "overlap the all-to-all with dense compute"


# A collective kind gets its own fix text in the finding when it holds this share of the
# exposed time.
MIXED_FIX_SHARE = 0.25


def mixed_fix(by: pl.DataFrame, fws: frozenset[str]) -> tuple[str, str]:
    """The fix for each collective kind that holds a real share of the exposed time, largest
    first ("allgather: ...; allreduce: ..." where several do)."""
    total = max(float(by["exposed_ns"].sum()), 1.0)
    rows = by.sort("exposed_ns", "collective", descending=[True, False], nulls_last=True)
    kinds = [r["collective"] for r in rows.iter_rows(named=True) if r["exposed_ns"] >= MIXED_FIX_SHARE * total]
    kinds = kinds or [rows["collective"][0]]
    fixes = [(k, *exposed_fix(k, fws)) for k in kinds]
    if len(fixes) == 1:
        return fixes[0][1], fixes[0][2]
    return " ".join(f"{k or 'other collectives'}: {fix}" for k, fix, _ in fixes), fixes[0][2]




_JOB_TEXTS = {
    "allreduce": "all-reduce: overlap it with the backward pass (DDP's buckets do: bucket_cap_mb, "
    "gradient_as_bucket_view=True, static_graph=True; model.no_sync() with gradient accumulation)",
    "allgather": "all-gather: prefetch it ahead of use (FSDP: forward_prefetch=True, "
    "backward_prefetch=BackwardPrefetch.BACKWARD_PRE, limit_all_gathers=True; else async_op=True "
    "issued one layer early)",
    "reduce_scatter": "reduce-scatter: let it overlap the rest of backward (FSDP's "
    "backward_prefetch; else async_op=True, waited on before the optimizer step)",
    "all_to_all": "all-to-all: overlap it with dense compute (pipeline the embedding lookup: "
    "TorchRec's TrainPipelineSparseDist; chunk mixture-of-experts dispatch); DDP bucket settings "
    "do not apply to it",
}


def job_exposed_fix(kinds: list[str | None]) -> str | None:
    """The job finding's fix for exposed collectives of these kinds (largest first); None when
    no kind is known."""
    parts = [_JOB_TEXTS.get(k or "", f"{k}: issue it with async_op=True and wait where the result is used") for k in kinds if k]
    return "overlap the collectives with compute, by kind: " + "; ".join(parts) if parts else None
