"""Predicted vs measured saving for every before/after pair in sample_traces/.

Two measured savings: the fix timed without the profiler when the pair was recorded (CUDA
events around steps that ran unprofiled: ``fix_timings.json``, ``models/*timings.json``,
``comm/comm_timings.json``), and ``traceinsight diff``'s own figure on the traced steps (1 - the
ratio of the median kept step device time, after / before). The prediction is the finding's
saving applied alone, on the clock ``analyze`` prices on (the un-profiled step where it has one:
``findings.price.clock``), and, beside it, what the finding lists (only what it adds to the findings
ranked above it, so that the list adds up) and the pool formula it falls back to. Where the
change also removes what other findings name (``ALSO``), the prediction beside it is those
findings' changes replayed together (``traceinsight whatif --finding``).
Prints the Markdown table of docs/findings.md:

    python benchmarks/findings_pairs.py
"""

from __future__ import annotations

import json
from pathlib import Path

from traceinsight.analysis.diff.compare import DiffOptions, DiffResult, diff_traces
from traceinsight.analysis.findings import FindingsResult
from traceinsight.analysis.report import analyze
from traceinsight.api import whatif
from traceinsight.trace.loader import load

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
# (before, after, the finding the change addresses, what the change was)
PAIRS = (
    ("amp_off", "amp_on", "fp32_no_tensor_cores", "bf16 autocast"),
    ("dataloader_w0", "dataloader_w4", "dataloader_stall", "4 workers"),
    ("fix_tf32_before", "fix_tf32_after", "fp32_no_tensor_cores", "TF32"),
    ("fix_optimizer_before", "fix_optimizer_after", "unfused_optimizer", "foreach=False → fused=True"),
    ("fix_pinned_before", "fix_pinned_after", "pageable_memcpy", "pinned + non_blocking"),
    ("fix_cpu_tensor_before", "fix_cpu_tensor_after", "cpu_tensor_creation", "tensors made on the GPU"),
    ("fix_item_sync_before", "fix_item_sync_after", "host_sync", "one .item() per step, not per micro-step"),
    ("fix_fp64_before", "fix_fp64_after", "fp64_compute", "float32"),
    ("fix_misaligned_before", "fix_misaligned_after", "gemm_misaligned", "8191 → 8192 bf16"),
    ("fix_bmm_before", "fix_bmm_after", "sequential_small_gemms", "one bmm"),
    ("fix_launch_before", "fix_launch_after", "launch_bound", "eager → CUDA graphs"),
    ("fix_churn_before", "fix_churn_after", "allocator_churn", "no empty_cache per step"),
    ("models/model_attention_before", "models/model_attention_after", "eager_attention", 'attn_implementation="sdpa"'),
    ("models/model_attention_fusion_before", "models/model_attention_fusion_after", "eager_attention", 'sdpa, the mask\'s sync kept'),
    ("models/model_channels_last_256_before", "models/model_channels_last_256_after", "channels_last", "channels_last, batch 256"),
    ("models/model_fusion_before", "models/model_fusion_after", "unfused_elementwise", "torch.compile"),
    ("catalogue/llama_eager", "catalogue/llama_compiled", "unfused_elementwise", "torch.compile"),
    ("whatif/whatif_sync", "whatif/whatif_sync_dropped", "host_sync", "torch.cuda.synchronize() dropped"),
    ("comm/comm_gloo_before.rank0", "comm/comm_gloo_after.rank0", "cpu_collectives", "gloo -> NCCL"),
    ("comm/comm_bucket_before.rank0", "comm/comm_bucket_after.rank0", "exposed_communication", "one DDP bucket -> 25 MB"),
    ("comm/comm_a2a_before.rank0", "comm/comm_a2a_after.rank0", "exposed_all_to_all", "all-to-all async"),
    ("causes/cause_repeat_before", "causes/cause_repeat_after", "repeated_launches", "per-parameter EMA loop → one _foreach_lerp_"),
    ("causes/cause_alloc_before", "causes/cause_alloc_after", "allocator_churn", "no empty_cache after each eval batch"),
    ("causes/cause_boolmask_before", "causes/cause_boolmask_after", "host_sync", "logits[mask] → ignore_index=-100"),
    ("causes/cause_compile_eager_before", "causes/cause_compile_eager_after", "compile_not_applied", 'backend="eager" → Inductor'),
    ("causes_b/dataloader_cpu_before", "causes_b/dataloader_cpu_after", "dataloader_stall", "CPU augmentation → on the GPU"),
    ("causes_b/precision_fp32", "causes_b/precision_tf32", "fp32_no_tensor_cores", "TF32 (ResNet-50, cuDNN)"),
    ("causes_b/precision_fp32", "causes_b/precision_bf16", "fp32_no_tensor_cores", "bf16 autocast (ResNet-50)"),
    ("causes_b/attention_block_before", "causes_b/attention_block_after", "eager_attention", "timm fused_attn (SDPA)"),
    # held out: recorded after the rules they check (sample_traces/make_holdout_pairs.py, H100)
    ("holdout/holdout_vit_empty_cache_before", "holdout/holdout_vit_empty_cache_after", "allocator_churn", "no empty_cache per step (ViT-S)"),
    ("holdout/holdout_metrics_sync_before", "holdout/holdout_metrics_sync_after", "host_sync", "metrics read every 10 steps"),
    ("holdout/holdout_sync_then_prep_before", "holdout/holdout_sync_then_prep_after", "host_sync", "synchronize() before the batch dropped"),
    ("holdout/holdout_ner_boolmask_before", "holdout/holdout_ner_boolmask_after", "host_sync", "logits[mask] → ignore_index, batch 8"),
    ("holdout/holdout_resnet50_compile_before", "holdout/holdout_resnet50_compile_after", "unfused_elementwise", "torch.compile (ResNet-50 bf16)"),
    ("holdout/holdout_resnet50_channels_last_before", "holdout/holdout_resnet50_channels_last_after", "channels_last", "channels_last (ResNet-50 bf16, batch 96)"),
    ("holdout/holdout_moe_experts_before", "holdout/holdout_moe_experts_after", "host_sync", "MoE experts: eager loop → grouped_mm"),
)


def measured_pct(result: DiffResult) -> float | None:
    """The saving ``diff`` measures: minus its change of the median step time, in %."""
    change = result.step_time.change_pct
    return None if change is None else -change


def findings_of(path: Path) -> FindingsResult:
    found = analyze(load(path), only=["findings"]).sections["findings"]
    assert isinstance(found, FindingsResult)
    return found


def saving_of(result: FindingsResult, finding_id: str) -> float | None:
    return next((f.saving_pct for f in result.findings if f.id == finding_id), None)


def predictions(result: FindingsResult, finding_id: str) -> tuple[str, str]:
    """(pool formula, replayed) for the finding, material or not; "-" where there is none."""
    f = next((f for f in (*result.findings, *result.not_material) if f.id == finding_id), None)
    if f is None:
        return "-", "-"
    if f.method.startswith("replayed") and f.claim_pct is not None:
        return f"{f.claim_pct:.1f} %", f"{f.saving_pct:.1f} %"
    return f"{f.saving_pct:.1f} %", "-"


def unprofiled_pct() -> dict[str, float]:
    """Each pair's saving timed without the profiler when it was recorded, by pair name."""
    out: dict[str, float] = {}
    for name in ("fix_timings.json", "causes/cause_timings.json", "holdout/holdout_timings.json", "models/model_timings.json", "models/isolation_retimed.json", "models/retimed_model_pairs.json"):
        path = SAMPLES / name
        if path.exists():
            out.update({row["pair"]: float(row["saving_pct"]) for row in json.loads(path.read_text())})
    # pairs keyed by their traces' names (one "before" serves two pairs: fp32 → TF32, → bf16)
    causes = SAMPLES / "causes_b" / "cause_timings_b.json"
    if causes.exists():
        out.update({f"{r['before']}→{r['after']}": float(r["saving_pct"]) for r in json.loads(causes.read_text())})
    comm = SAMPLES / "comm" / "comm_timings.json"
    if comm.exists():
        ms = {(r["pair"], r["side"]): r["ms"] for r in json.loads(comm.read_text()) if r["rank"] == 0}
        for pair in {p for p, _ in ms}:
            if (pair, "before") in ms and (pair, "after") in ms:
                out[f"comm_{pair}_before.rank0"] = 100.0 * (1 - ms[(pair, "after")] / ms[(pair, "before")])
    return out


# Pairs whose change is one lever of the finding's fix: that lever's price is the prediction.
LEVER_OF = {"bf16 autocast": "bf16 autocast", "TF32": "TF32 matmuls", "TF32 (ResNet-50, cuDNN)": "TF32 matmuls",
            "bf16 autocast (ResNet-50)": "bf16 autocast"}


# Pairs whose change also removes what other findings of the "before" trace name: the change
# is priced by those findings' changes replayed together (``whatif --finding``), beside the
# finding's own price. Hugging Face's switch to sdpa also drops the eager mask's blocking copy.
ALSO = {("models/model_attention_before", "models/model_attention_after"): ("host_sync",)}


def together(path: Path, finding_id: str, also: tuple[str, ...]) -> str:
    """`` (with X: N %)``: the finding and ``also`` replayed together; empty without ``also``."""
    if not also:
        return ""
    pct = whatif(path, findings=[finding_id, *also]).steady_saving_pct
    return f" (with {' + '.join(also)}: {pct:.1f} %)"


def alone(result: FindingsResult, finding_id: str, change: str = "") -> str:
    f = next((f for f in (*result.findings, *result.not_material) if f.id == finding_id), None)
    lever = next((lv for lv in f.levers if lv.label == LEVER_OF.get(change)), None) if f is not None else None
    if lever is not None:
        return f"{lever.saving_pct:.1f} % ({lever.label})"
    return "-" if f is None or f.alone_pct is None else f"{f.alone_pct:.1f} %"


def main() -> None:
    truth = unprofiled_pct()
    print(
        "| pair | change | finding | clock | predicted alone | listed | pool formula | measured without the profiler "
        "| measured (diff of traced steps) | step before → after (median, traced) | first before | after |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for before, after, finding, change in PAIRS:
        b_path, a_path = SAMPLES / f"{before}.json.gz", SAMPLES / f"{after}.json.gz"
        if not (b_path.exists() and a_path.exists()):
            continue
        d = diff_traces(load(b_path), load(a_path), DiffOptions(n_boot=200))
        fb, fa = findings_of(b_path), findings_of(a_path)
        pool, replayed = predictions(fb, finding)
        measured = measured_pct(d)
        st = d.step_time
        steps = f"{(st.before_median_ns or 0) / 1e6:.2f} → {(st.after_median_ns or 0) / 1e6:.2f} ms"
        remains = saving_of(fa, finding)
        name = Path(before).name.removeprefix("fix_").removeprefix("model_").removeprefix("cause_").removeprefix("holdout_").removesuffix("_before")
        real = truth.get(name, truth.get(Path(before).name, truth.get(f"{Path(before).name}→{Path(after).name}")))
        listed = replayed if replayed != "-" else pool
        print(
            f"| {name} | {change} | `{finding}` | {fb.clock} | {alone(fb, finding, change)}"
            f"{together(b_path, finding, ALSO.get((before, after), ()))} | {listed} | {pool} | "
            f"{'-' if real is None else f'{real:.1f} %'} | "
            f"{'-' if measured is None else f'{measured:.1f} %'} | {steps} | "
            f"`{fb.findings[0].id if fb.findings else '-'}` | {'none' if remains is None else f'{remains:.1f} %'} |"
        )


if __name__ == "__main__":
    main()
