"""The catalogue of findings: stable ids, plain titles, the fix, and the shared thresholds.

The ids are part of the output contract (``docs/findings.md`` documents each one); add new
ones, never rename. Multi-rank ids are listed so that one catalogue covers both kinds of input.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    id: str
    title: str
    fix: str


_ENTRIES = (
    Entry(
        "dataloader_stall",
        "The GPU waits for the DataLoader",
        "Load batches in parallel with the step: DataLoader(..., num_workers=N (e.g. the CPU "
        "cores per GPU), pin_memory=True, persistent_workers=True, prefetch_factor=2..4); move "
        "heavy per-item transforms to the GPU or precompute them.",
    ),
    Entry(
        "pageable_memcpy",
        "Host-device copies from pageable memory",
        "Copy from pinned memory: DataLoader(pin_memory=True) or tensor.pin_memory(), then "
        ".to(device, non_blocking=True) so the copy overlaps with compute.",
    ),
    Entry(
        "cpu_tensor_creation",
        "Tensors created on the CPU each step and copied to the GPU",
        "Create them on the device (torch.arange(n, device='cuda'), torch.full(..., device=...), "
        "torch.tensor(x, device=...)) or build them once outside the loop and reuse them.",
    ),
    Entry(
        "host_sync",
        "The host waits for the GPU inside the loop",
        "Remove synchronising calls from the step: keep losses/metrics on the GPU and read them "
        "every N steps (no .item(), .cpu(), .tolist(), print(tensor) per step), avoid "
        "data-dependent shapes (nonzero, boolean-mask indexing), drop explicit "
        "torch.cuda.synchronize(); torch.cuda.set_sync_debug_mode('warn') points at each one.",
    ),
    Entry(
        "fp64_compute",
        "Kernels compute in float64",
        "Keep tensors in float32 or lower: model.float() / dtype=torch.float32, convert NumPy "
        "input with torch.from_numpy(a).float(), avoid torch.set_default_dtype(torch.float64); "
        "with torch.set_float32_matmul_precision('high') the matmuls then use TF32 tensor cores.",
    ),
    Entry(
        "fp32_no_tensor_cores",
        "float32 matrix multiplies run without tensor cores",
        "Let matmuls and convolutions use tensor cores: torch.set_float32_matmul_precision('high') "
        "(or torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = True), "
        "or train in mixed precision with torch.autocast('cuda', dtype=torch.bfloat16).",
    ),
    Entry(
        "gemm_misaligned",
        "Matrix multiplies with dimensions that are not multiples of 8",
        "Pad the GEMM dimensions (hidden sizes, vocabulary, batch x sequence) to multiples of 8 "
        "for 16-bit types (of 4 for TF32), e.g. vocab_size rounded up to a multiple of 64.",
    ),
    Entry(
        "launch_bound",
        "Kernels are shorter than their launches: the GPU waits for the CPU to launch work",
        "Cut launches: torch.compile(model) to fuse small ops, CUDA graphs "
        "(torch.compile(mode='reduce-overhead') or torch.cuda.graphs), or larger batches so each "
        "kernel does more work.",
    ),
    Entry(
        "sequential_small_gemms",
        "Many small same-shape matrix multiplies run one after another",
        "Stack the operands and issue one batched call: torch.bmm / torch.matmul on a [B, M, K] "
        "tensor (or torch.baddbmm), instead of a Python loop of small matmuls.",
    ),
    Entry(
        "unfused_optimizer",
        "The optimizer step runs as many small kernels",
        "Use the fused optimizer: torch.optim.AdamW(params, ..., fused=True) (or foreach=True "
        "where fused is not available for the optimizer).",
    ),
    Entry(
        "noncontiguous_copy",
        "Time spent making tensors contiguous",
        "Avoid layout copies: keep tensors in the layout the next op wants (no .contiguous() "
        "after transpose/permute where the consumer accepts strides), use channels_last "
        "consistently, fuse the permute into the producer (torch.compile).",
    ),
    Entry(
        "graph_break",
        "torch.compile splits the step into several graphs",
        "Remove the graph breaks: run with TORCH_LOGS=graph_breaks (or torch._dynamo.explain) "
        "and rewrite the reported lines (data-dependent Python control flow, .item(), print, "
        "unsupported calls); fullgraph=True makes a break an error.",
    ),
    Entry(
        "recompile",
        "torch.compile recompiles in steady state",
        "Stop guard failures: run with TORCH_LOGS=recompiles; mark varying sizes dynamic "
        "(torch._dynamo.mark_dynamic or dynamic=True), keep Python scalars that change per step "
        "out of the compiled function or pass them as tensors.",
    ),
    Entry(
        "compile_in_window",
        "Compilation runs inside the profiled window",
        "Profile after warm-up: torch.profiler.schedule(wait=1, warmup=2, active=N) with the "
        "compiled model already called once; if it recurs every run, cache it "
        "(TORCHINDUCTOR_FX_GRAPH_CACHE=1, torch.compiler.save_cache_artifacts).",
    ),
    Entry(
        "host_bound",
        "The GPU waits while the host works on something else",
        "Find what the host does in the named region (profile with with_stack=True, or py-spy) and "
        "take it off the training thread's critical path: move it to DataLoader workers or a "
        "background thread, do it every N steps, or overlap it with queued GPU work.",
    ),
    Entry(
        "exposed_communication",
        "Collectives run while no compute overlaps them",
        "Overlap communication with the backward pass: DDP(model, bucket_cap_mb=25..100, "
        "gradient_as_bucket_view=True, static_graph=True) and no extra synchronisation between "
        "backward and step; accumulate gradients with model.no_sync(); for FSDP set "
        "backward_prefetch=BackwardPrefetch.BACKWARD_PRE.",
    ),
    Entry(
        "allocator_churn",
        "cudaMalloc/cudaFree in steady-state steps",
        "Keep the caching allocator warm: no torch.cuda.empty_cache() in the loop, fixed or "
        "bucketed shapes, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to limit fragmentation.",
    ),
    Entry(
        "memory_pressure",
        "Reserved GPU memory is close to the device's capacity",
        "Lower the peak: activation checkpointing (torch.utils.checkpoint), smaller micro-batches "
        "with gradient accumulation, mixed precision, set_to_none=True in zero_grad, "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
    ),
    Entry(
        "eager_attention",
        "Attention runs as separate matmul, softmax and matmul kernels",
        "Use torch.nn.functional.scaled_dot_product_attention (Hugging Face: "
        'attn_implementation="sdpa") so one fused attention kernel replaces the matmuls, softmax, '
        "scale, mask and dropout kernels and the score matrix never goes to memory.",
    ),
    Entry(
        "unfused_elementwise",
        "Chains of elementwise and normalization kernels run unfused",
        "Fuse the chains: torch.compile(model) (Inductor turns each chain of elementwise, "
        "normalization and cast kernels into one kernel), or fused modules where they exist "
        "(torch.nn.RMSNorm, F.gelu as one op, a fused rotary embedding).",
    ),
    Entry(
        "zero_grad_memset",
        "Gradients are zeroed in place every step",
        "Set gradients to None instead of zeroing them: optimizer.zero_grad(set_to_none=True) "
        "(the default since torch 2.0) or model.zero_grad(set_to_none=True); backward then writes "
        "each new gradient instead of adding it into a zeroed one.",
    ),
    Entry(
        "channels_last",
        "16-bit convolutions run on NCHW tensors and convert their layout",
        "Run the convolutions in channels_last: model = model.to(memory_format=torch.channels_last) "
        "and each input x = x.contiguous(memory_format=torch.channels_last) (torch.compile also "
        "picks the layout); batch norm then runs its channels_last kernels too.",
    ),
    Entry(
        "input_channels_padding",
        "The first convolution's input channels are not a multiple of 8",
        "Pad the input's channels with zeros (3 → 4 for the NHWC fast path, or → 8): "
        "torch.nn.functional.pad(x, (0, 0, 0, 0, 0, 1)) and a conv with in_channels=4 whose "
        "extra weight channel is zero.",
    ),
    # Communication by what it is (exposed all-to-all, per-parameter all-reduce, host collectives).
    Entry(
        "exposed_all_to_all",
        "All-to-all collectives run while no compute overlaps them",
        "Overlap the all-to-all with dense compute: pipeline the embedding lookup of the next "
        "batch with the dense part of this one (TorchRec's TrainPipelineSparseDist); for "
        "mixture-of-experts layers, dispatch one chunk of tokens while the experts compute the "
        "previous one.",
    ),
    Entry(
        "allreduce_per_parameter",
        "One small all-reduce per parameter instead of a few buckets",
        "Bucket the gradient all-reduce: DistributedDataParallel (25 MB buckets, reduced during "
        "backward), or flatten the gradients and call dist.all_reduce once.",
    ),
    Entry(
        "cpu_collectives",
        "Collectives run on the host (gloo) and fill much of the step",
        "Run collectives on the GPUs: init_process_group('nccl') (or 'cpu:gloo,cuda:nccl'), and "
        "make them fewer and larger (DDP buckets, one flat tensor per call).",
    ),
    Entry(
        "host_preprocessing",
        "The GPU waits while the main thread prepares its input",
        "Take the input preparation off the launching thread: copy the raw batch from pinned "
        "memory and transform it on the GPU (torchvision.transforms.v2 on CUDA tensors), "
        "precompute it, or prepare the next batch in a background thread or DataLoader workers "
        "(num_workers=N, pin_memory=True; each worker runs torch ops on one thread: measure).",
    ),
    Entry(
        "memory_growth",
        "Allocated GPU memory grows at every step",
        "Find what keeps tensors alive across steps (the allocation sites below): store "
        "loss.item() or tensor.detach() (.cpu()) instead of tensors that hold the autograd "
        "graph, do not append outputs to lists that outlive the step, clear caches you fill.",
    ),
    Entry(
        "repeated_launches",
        "The same operators are called in a loop, one small launch at a time",
        "Do the loop in one call: torch._foreach_* ops over the list of tensors (torch._foreach_lerp_, "
        "_foreach_mul_, _foreach_add_), one batched op over a stacked tensor (torch.stack, then one "
        "call), or torch.compile of the function that holds the loop.",
    ),
    Entry(
        "compile_not_applied",
        "torch.compile runs, but nothing compiled does: the model still runs eagerly",
        "Compile with the default backend (torch.compile(model), Inductor); backend=\"eager\" and "
        "\"aot_eager\" only check that Dynamo can capture the model and generate no kernels.",
    ),
    # Built from several ranks' results by the job analyses; listed here so ids stay unique.
    Entry("rank_straggler", "One rank is slower than the others", "See the rank's own findings."),
    Entry(
        "collective_wait", "Ranks wait in collectives for each other", "Balance the ranks' work."
    ),
    Entry(
        "load_imbalance", "Work is unevenly split across ranks", "Balance data and model shards."
    ),
    Entry(
        "late_arrival",
        "One rank arrives last at collectives; the others wait for it",
        "Shorten or move the work the rank does before its collectives.",
    ),
    Entry(
        "slow_collective",
        "Exposed collectives run far below the link's bandwidth",
        "Fewer, larger collectives (buckets); check NCCL's transport.",
    ),
)

CATALOGUE: dict[str, Entry] = {e.id: e for e in _ENTRIES}

# A finding saving less than this share of the analysed time is listed as not material.
MATERIALITY_PCT = 1.0
# A finding saving at least this share can lead the verdict ("fix first"); a cause in the code
# is listed before the launch-bound residual priced after it only from this size on.
LEAD_SAVING_PCT = 2.0
# Findings defined as what is left once others are fixed, with those others: host_bound leaves
# out the idle gaps a sync opened (no host work can overlap queued GPU work until the sync
# goes), so it prices what the host work still costs after host_sync's fix. Priced and listed
# after them, as launch_bound is after the causes nested in it.
PRICED_AFTER: dict[str, tuple[str, ...]] = {"host_bound": ("host_sync",)}
# Findings whose cost is memory, not time: no time saving is claimed, they are listed (after
# the time findings) whatever their size, with their memory figure instead of a saving.
MEMORY_FINDINGS = frozenset({"memory_pressure", "memory_growth"})
# Share of the tensor-core peak a large, well-shaped cuBLAS GEMM reaches in practice: the bf16
# GEMMs of the H200 samples run at 73 % (mm_sweep_4096, 4096^3) to 81 % (amp_on) of the peak.
TENSOR_CORE_EFFICIENCY = 0.75
# No GEMM kernel finishes faster than this, however few its FLOPs: the shortest GEMM kernels in
# the H200 samples (64x64 bf16 on tensor cores) take 1.8 µs.
GEMM_FLOOR_NS = 2_000
# Share of the non-tensor-core fp32/fp64 peak SIMT GEMMs reach (train_eager's run at ~0.75).
SIMT_EFFICIENCY = 0.7
# Share of peak DRAM bandwidth a streaming kernel (fused optimizer, elementwise) reaches.
BANDWIDTH_EFFICIENCY = 0.7
# Host-to-device bandwidth from pinned memory when the trace has no pinned copy to measure.
PINNED_GBPS = 25.0
# This share of kernels launched after the GPU ran out of work makes the sub-threshold idle
# before them launch overhead (the back-to-back launch pattern).
LAUNCH_SHORT_PCT = 30.0
# Same-shape GEMMs adjacent on a stream, each below this, this many in a row: one batched call.
SMALL_GEMM_NS = 50_000
# A gap opened by a sync begins within this of the blocking call's return: the device drains,
# then the call returns a few µs later (8-25 µs in the item_sync pair on an H200).
SYNC_RETURN_TOLERANCE_NS = 50_000
SMALL_GEMM_RUN = 8
# A loop on the host: a sequence of at most this many operators under one parent, repeated at
# least REPEAT_MIN times back to back (a model's layers repeat fewer times, each with many more
# operators; a loop over parameters or over a batch's samples repeats tens to hundreds of times).
REPEAT_MAX_PERIOD = 8
REPEAT_MIN = 16
# Reserved memory above this share of the device's memory is pressure.
MEMORY_PRESSURE_SHARE = 0.9
# Bytes an AdamW-style fused step moves per parameter element (fp32): reads param, grad,
# exp_avg, exp_avg_sq; writes param, exp_avg, exp_avg_sq.
FUSED_ADAM_BYTES_PER_PARAM = 28

# The fix in a few words, for the one-paragraph verdict (the full fix is the entry's ``fix``).
ACTION: dict[str, str] = {
    "dataloader_stall": "more DataLoader workers (num_workers, pin_memory, prefetch)",
    "pageable_memcpy": "copy from pinned memory with non_blocking=True",
    "cpu_tensor_creation": "create the tensors on the device, or once outside the loop",
    "host_sync": "drop per-step .item()/.cpu()/synchronize calls",
    "fp64_compute": "compute in float32 or lower",
    "fp32_no_tensor_cores": "torch.set_float32_matmul_precision('high') or bf16 autocast",
    "gemm_misaligned": "pad GEMM dimensions to multiples of 8",
    "launch_bound": "fewer, larger launches: torch.compile or CUDA graphs",
    "sequential_small_gemms": "one batched torch.bmm instead of a loop of small matmuls",
    "unfused_optimizer": "the fused optimizer (fused=True)",
    "noncontiguous_copy": "keep tensors in the layout the next op wants",
    "graph_break": "remove the graph breaks (TORCH_LOGS=graph_breaks)",
    "recompile": "stop the guard failures (TORCH_LOGS=recompiles)",
    "compile_in_window": "profile after warm-up",
    "host_bound": "move or cut the host work in that region",
    "exposed_communication": "overlap the collectives with compute (DDP buckets, no_sync)",
    "allocator_churn": "no torch.cuda.empty_cache() in the loop",
    "repeated_launches": "one foreach or batched call instead of the loop",
    "compile_not_applied": "compile with Inductor (the default backend)",
    "memory_pressure": "lower the peak memory",
    "eager_attention": "fused attention: F.scaled_dot_product_attention / attn_implementation=\"sdpa\"",
    "unfused_elementwise": "torch.compile(model) to fuse the elementwise chains",
    "host_preprocessing": "prepare inputs on the GPU, ahead in a thread, or precomputed",
    "memory_growth": "stop keeping tensors (with their graph) across steps",
    "rank_straggler": "see the slow rank's own findings",
    "collective_wait": "balance the ranks' work",
    "load_imbalance": "balance data and model shards",
    "late_arrival": "shorten the late rank's work before its collectives",
    "slow_collective": "fewer, larger collectives",
    "zero_grad_memset": "zero_grad(set_to_none=True)",
    "channels_last": "channels_last model and inputs",
    "input_channels_padding": "pad the input channels to 4 or 8",
    "exposed_all_to_all": "overlap the all-to-all with dense compute",
    "allreduce_per_parameter": "bucket the all-reduces (DDP, or flatten + one all_reduce)",
    "cpu_collectives": "collectives on the GPUs (NCCL), fewer and larger",
}
