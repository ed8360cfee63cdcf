"""Attention written out: matmul → scale/mask → softmax (→ dropout) → matmul as separate kernels.

Hugging Face's ``attn_implementation="eager"``, hand-written attention, older ViT/BERT code:
the B·H·S_q·S_k score matrix is written to memory, read back by the scale, mask, softmax,
dropout and dtype casts, and once more by the second matmul; the backward pass does it again.
A fused kernel (``F.scaled_dot_product_attention``: flash, memory-efficient, cuDNN) keeps the
scores on chip and does the same FLOPs in one kernel.

Found from host ops where shapes were recorded: a softmax whose input is the output of the
matmul before it and the first operand of the matmul after it (same element count, same last
dimension). Every kernel launched by an op that reads or writes a tensor of that score shape is
the attention subgraph a fused kernel replaces. Without shapes, from kernels alone: a softmax
kernel between two GEMM kernels on a stream, recurring (one per layer), and only where no fused
attention kernel runs at all (a trace without shapes cannot tell which attention is which).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.core.memo import per_trace
from traceinsight.analysis.device import model as device_model
from traceinsight.analysis.findings.catalogue import BANDWIDTH_EFFICIENCY, SIMT_EFFICIENCY
from traceinsight.analysis.findings.model import Evidence, KernelEvidence, OpEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.chains import MEMORY_FAMILIES
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.fuse_kernels import FuseKernels

SOFTMAX_OPS = ("aten::softmax", "aten::_softmax", "aten::_safe_softmax")
SOFTMAX_BACKWARD_OPS = ("aten::_softmax_backward_data",)
MATMUL_OPS = ("aten::matmul", "aten::bmm", "aten::baddbmm")
# A softmax inside one of these ran as SDPA's own math fallback: not attention the user wrote.
SDPA_OP = r"scaled_dot_product|_efficient_attention|_flash_attention"
# Share of the dense tensor-core peak a fused attention kernel reaches fwd + bwd: the cuDNN SDPA
# kernels of the model_attention after-trace (GPT-2, head dim 64, bf16, H100) run at 36 % of the
# bf16 peak counted as 4·B·H·S²·D forward and 2.5x that backward; FlashAttention-2 reports
# 35-50 % of peak on A100/H100 at head dims 64-128.
FUSED_ATTENTION_EFFICIENCY = 0.4
# Backward FLOPs of attention over forward (dQ, dK, dV, dP and the recomputed scores).
BACKWARD_FLOPS_FACTOR = 2.5
# Kernel-only detection: at most this many kernels between the two GEMMs of one attention
# (scale, mask, softmax, cast, dropout and their backward), and at least this many patterns
# per step (one per layer; a single softmax between GEMMs is not a model's attention).
MAX_KERNELS_BETWEEN = 12
MIN_PATTERNS_PER_STEP = 2
_DTYPE = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64"}
_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}


@dataclass(frozen=True)
class Scores:
    """One attention shape: the score matrix is ``bh`` × ``sq`` × ``sk``, the head dim ``d``."""

    bh: int
    sq: int
    sk: int
    d: int
    dtype: str
    forward: int  # calls over the trace
    backward: int

    @property
    def numel(self) -> int:
        return self.bh * self.sq * self.sk


@dataclass(frozen=True)
class Subgraph:
    kernels: pl.DataFrame  # id, name, dur_ns, op, input_dims, family
    scores: tuple[Scores, ...]  # empty when found from kernels alone
    ops: tuple[OpEvidence, ...]


def _parse(dims: str | None) -> list[Any]:
    try:
        got = json.loads(dims) if dims else []
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def _matrix(d: Any) -> list[int] | None:
    return [int(x) for x in d] if isinstance(d, list) and len(d) >= 2 and all(isinstance(x, int) for x in d) else None


def _product(name: str, dims: list[Any]) -> tuple[int, int, int, int] | None:
    """(output elements, output rows, output columns, inner dim K) of a matmul-family op."""
    pair = dims[1:3] if name == "aten::baddbmm" else dims[:2]
    if len(pair) < 2:
        return None
    ma, mb = _matrix(pair[0]), _matrix(pair[1])
    if ma is None or mb is None:
        return None
    batch = max(math.prod(ma[:-2]), math.prod(mb[:-2]))
    return batch * ma[-2] * mb[-1], ma[-2], mb[-1], ma[-1]


def touches(name: str, dims_text: str | None, scores: tuple[Scores, ...]) -> bool:
    """Whether an op reads a score-shaped tensor, or (a matmul) writes one."""
    dims = _parse(dims_text)
    shapes = {(s.numel, s.sq, s.sk) for s in scores}
    for d in dims:
        m = _matrix(d)
        if m is not None and (math.prod(m), m[-2], m[-1]) in shapes:
            return True
    if name in MATMUL_OPS or name in ("aten::mm",):
        out = _product(name, dims)
        return out is not None and (out[0], out[1], out[2]) in shapes
    return False


def _host_ops(ctx: FindingContext) -> pl.DataFrame:
    names = [*SOFTMAX_OPS, *SOFTMAX_BACKWARD_OPS, *MATMUL_OPS]
    ev = ctx.trace.events.select("id", "pid", "tid", "ts_ns", "end_ns", "name", "kind", "input_dims", "input_types")
    return ev.filter(
        (pl.col("kind") == "cpu_op")
        & (pl.col("name").cast(pl.String).is_in(names) | pl.col("name").cast(pl.String).str.contains(SDPA_OP))
    ).select("id", "pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String), "input_dims", "input_types")


def _written_out(ops: pl.DataFrame) -> tuple[Scores, ...]:
    """Score shapes of softmaxes between two matching matmuls on one thread (not inside SDPA)."""
    name = pl.col("name")
    mm = ops.filter(name.is_in(MATMUL_OPS)).with_columns(
        prod=pl.struct("name", "input_dims").map_elements(
            lambda r: list(_product(r["name"], _parse(r["input_dims"])) or (0, 0, 0, 0)),
            return_dtype=pl.List(pl.Int64),
        ),
        first=pl.col("input_dims").map_elements(
            lambda t: (lambda m: [math.prod(m), m[-1]] if m else [0, 0])(_matrix((_parse(t) or [None])[0])),
            return_dtype=pl.List(pl.Int64),
        ),
    )
    sm = ops.filter(name.is_in(SOFTMAX_OPS)).with_columns(
        shape=pl.col("input_dims").map_elements(
            lambda t: (lambda m: m if m and len(m) >= 3 else [])(_matrix((_parse(t) or [None])[0])),
            return_dtype=pl.List(pl.Int64),
        )
    ).filter(pl.col("shape").list.len() >= 3)
    if mm.height == 0 or sm.height == 0:
        return ()
    sm = sm.with_columns(
        numel=pl.col("shape").list.eval(pl.element().product()).list.first(),
        sq=pl.col("shape").list.get(-2),
        sk=pl.col("shape").list.get(-1),
    )
    sdpa = ops.filter(name.str.contains(SDPA_OP)).select(
        "pid", "tid", pl.col("ts_ns").alias("sdpa_ts"), pl.col("end_ns").alias("sdpa_end")
    )
    if sdpa.height:
        sm = sm.sort("ts_ns").join_asof(
            sdpa.sort("sdpa_ts"), left_on="ts_ns", right_on="sdpa_ts", by=["pid", "tid"], strategy="backward", check_sortedness=False
        ).filter(pl.col("sdpa_end").is_null() | (pl.col("sdpa_end") < pl.col("end_ns")))
    side = mm.select(
        "pid", "tid", "ts_ns", pl.col("id").alias("mm_id"), "prod", "first", pl.col("input_types").alias("types")
    ).sort("ts_ns")
    before = side.rename({c: f"{c}_b" for c in ("mm_id", "prod", "first", "types")})
    after = side.rename({c: f"{c}_a" for c in ("mm_id", "prod", "first", "types")})
    matched = (
        sm.sort("ts_ns")
        .join_asof(before.rename({"ts_ns": "b_ts"}), left_on="ts_ns", right_on="b_ts", by=["pid", "tid"], strategy="backward", check_sortedness=False)
        .join_asof(after.rename({"ts_ns": "a_ts"}), left_on="end_ns", right_on="a_ts", by=["pid", "tid"], strategy="forward", check_sortedness=False)
        .filter(
            (pl.col("prod_b").list.get(0, null_on_oob=True) == pl.col("numel"))
            & (pl.col("prod_b").list.get(2, null_on_oob=True) == pl.col("sk"))
            & (pl.col("first_a").list.get(0, null_on_oob=True) == pl.col("numel"))
            & (pl.col("first_a").list.get(1, null_on_oob=True) == pl.col("sk"))
        )
        # aten::softmax and its aten::_softmax share the matmul before them: one attention
        .unique("mm_id_b")
    )
    if matched.height == 0:
        return ()
    bwd = ops.filter(name.is_in(SOFTMAX_BACKWARD_OPS)).with_columns(
        numel=pl.col("input_dims").map_elements(
            lambda t: (lambda m: math.prod(m) if m else 0)(_matrix((_parse(t) or [None])[0])), return_dtype=pl.Int64
        )
    )
    out = []
    for r in (
        matched.with_columns(
            d=pl.col("prod_b").list.get(3),
            dtype=pl.col("types_b").map_elements(
                lambda t: _DTYPE.get(str((_parse(t) or ["?"])[0]), "unknown"), return_dtype=pl.String
            ),
        )
        .group_by("numel", "sq", "sk", "d")
        .agg(pl.len().alias("forward"), pl.col("dtype").mode().first())
        .sort("numel", "sq", "sk", "d")
        .iter_rows(named=True)
    ):
        n_bwd = int(bwd.filter(pl.col("numel") == r["numel"]).height)
        out.append(Scores(r["numel"] // (r["sq"] * r["sk"]), r["sq"], r["sk"], r["d"], r["dtype"], r["forward"], n_bwd))
    return tuple(out)


def _gpu_kernels(ctx: FindingContext) -> pl.DataFrame:
    ev = ctx.trace.events.filter(pl.col("kind") == "cpu_op").select(
        pl.col("id").alias("op_id"), pl.col("name").cast(pl.String).alias("op"), "input_dims"
    )
    k = ctx.trace.kernels.filter(pl.col("kind") == "kernel").select(
        "id", "ts_ns", "dur_ns", "device", "stream", "step", "op_id", "top_op_id", pl.col("name").cast(pl.String)
    )
    return k.join(ev, on="op_id", how="left")


def _from_ops(ctx: FindingContext, scores: tuple[Scores, ...]) -> pl.DataFrame:
    k = _gpu_kernels(ctx)
    keys = k.select("op", "input_dims").unique().drop_nulls("op")
    keys = keys.with_columns(
        hit=pl.struct("op", "input_dims").map_elements(
            lambda r: touches(r["op"], r["input_dims"], scores), return_dtype=pl.Boolean
        )
    ).filter(pl.col("hit"))
    return k.join(keys, on=["op", "input_dims"], how="semi")


def _from_kernels(ctx: FindingContext, kern: pl.DataFrame) -> pl.DataFrame:
    """Softmax kernels between two GEMM kernels on a stream, recurring; no fused attention."""
    fam = pl.col("family")
    if kern.filter(fam.is_in(["attention_fwd", "attention_bwd"])).height:
        return kern.clear()
    kern = kern.sort("device", "stream", "ts_ns", "id").with_columns(
        gemm=(fam == "gemm"),
        soft=(fam == "softmax") & ~pl.col("name").str.contains(r"(?i)log_?softmax"),
        bwd=pl.col("name").str.contains(r"(?i)backward|bwd|grad"),
    )
    kern = kern.with_columns(seg=pl.col("gemm").cast(pl.Int64).cum_sum().over("device", "stream"))
    segs = (
        kern.filter(~pl.col("gemm"))
        .group_by("device", "stream", "seg")
        .agg(pl.len().alias("n"), pl.col("soft").any(), (pl.col("soft") & pl.col("bwd")).any().alias("soft_bwd"))
    )
    counts = kern.group_by("device", "stream", "seg").agg(pl.len().alias("all"), pl.col("gemm").sum().alias("g"))
    last = kern.group_by("device", "stream").agg(pl.col("seg").max().alias("last"))
    hits = segs.join(last, on=["device", "stream"]).filter(
        pl.col("soft") & (pl.col("n") <= MAX_KERNELS_BETWEEN) & (pl.col("seg") >= 1) & (pl.col("seg") < pl.col("last"))
    )
    steps = max(ctx.step_count, 1)
    if hits.height < MIN_PATTERNS_PER_STEP * steps:
        return kern.clear().drop("gemm", "soft", "bwd", "seg")
    # The kernels between, the GEMM that opens the segment and the one after it; backward
    # also the GEMMs right before and after (dV beside dP, dK beside dQ: no kernel between).
    empty = counts.filter(pl.col("all") == pl.col("g")).select("device", "stream", "seg")
    wanted = pl.concat(
        [
            hits.select("device", "stream", "seg", pl.lit(True).alias("all_of_it")),
            hits.select("device", "stream", (pl.col("seg") + 1).alias("seg"), pl.lit(False).alias("all_of_it")),
            hits.filter(pl.col("soft_bwd")).join(
                empty.with_columns(pl.col("seg") + 1), on=["device", "stream", "seg"], how="semi"
            ).select("device", "stream", (pl.col("seg") - 1).alias("seg"), pl.lit(False).alias("all_of_it")),
            hits.filter(pl.col("soft_bwd")).join(
                empty.with_columns(pl.col("seg") - 1), on=["device", "stream", "seg"], how="semi"
            ).select("device", "stream", (pl.col("seg") + 2).alias("seg"), pl.lit(False).alias("all_of_it")),
        ]
    ).group_by("device", "stream", "seg").agg(pl.col("all_of_it").any())
    chosen = kern.join(wanted, on=["device", "stream", "seg"], how="inner").filter(
        pl.col("all_of_it") | pl.col("gemm")
    )
    return chosen.drop("gemm", "soft", "bwd", "seg", "all_of_it")


def find_subgraph(ctx: FindingContext) -> Subgraph | None:
    """The written-out attention of this trace: its kernels and shapes (None when there is none).
    Found once per trace, device and step count: the attention and the GEMM-alignment
    detectors both read it."""
    return per_trace(ctx.trace, ("attention_subgraph", ctx.device.vendor, ctx.step_count), lambda: _find_subgraph(ctx))


def _find_subgraph(ctx: FindingContext) -> Subgraph | None:
    ops = _host_ops(ctx)
    has_shapes = bool(ctx.trace.events.select("kind", "input_dims").filter(pl.col("kind") == "cpu_op")["input_dims"].drop_nulls().len())
    if has_shapes:
        scores = _written_out(ops)
        if not scores:
            return None
        kern = _from_ops(ctx, scores)
        kern = with_classes(kern, vendor=ctx.device.vendor)
    else:
        scores = ()
        kern = _from_kernels(ctx, with_classes(_gpu_kernels(ctx), vendor=ctx.device.vendor))
    if kern.height == 0:
        return None
    return Subgraph(kern, scores, _ops_evidence(ctx, kern) if scores else ())


def _ops_evidence(ctx: FindingContext, kern: pl.DataFrame, limit: int = 5) -> tuple[OpEvidence, ...]:
    top = (
        kern.group_by("op", "input_dims")
        .agg(pl.col("dur_ns").sum(), pl.col("op_id").n_unique().alias("calls"))
        .sort(["dur_ns", "op", "input_dims"], descending=[True, False, False])
        .head(limit)
    )
    return tuple(
        OpEvidence(name=r["op"], shapes=r["input_dims"], dtypes=ctx.op_dtypes(r["op"], r["input_dims"]),
                   calls=int(r["calls"]), dur_ns=int(r["dur_ns"]))
        for r in top.iter_rows(named=True)
    )


# ---- the estimate -------------------------------------------------------------------------


def _in_window_ns(ctx: FindingContext, kern: pl.DataFrame) -> int:
    """Kernel time outside the spans the window assessment left out as not steady state."""
    excluded = None if ctx.window is None else ctx.window.excluded
    if excluded is None or excluded.height == 0:
        return int(kern["dur_ns"].sum())
    hit = kern.with_columns(end_ns=pl.col("ts_ns") + pl.col("dur_ns")).join_where(
        excluded.select(pl.col("start_ns").alias("_xs"), pl.col("end_ns").alias("_xe")),
        pl.col("ts_ns") < pl.col("_xe"),
        pl.col("end_ns") > pl.col("_xs"),
    )
    return int(kern.join(hit.select("id").unique(), on="id", how="anti")["dur_ns"].sum())


def _fused_cost(ctx: FindingContext, sub: Subgraph) -> tuple[int, str]:
    """(ns over the trace, how) a fused kernel would take for the subgraph's attentions."""
    gemm_ns = int(sub.kernels.filter(pl.col("family") == "gemm")["dur_ns"].sum())
    bw = ctx.mem_bw_tbps
    total_ns = 0.0
    parts = []
    for s in sub.scores:
        peak = ctx.peak_tflops(s.dtype) if s.dtype in ("bf16", "fp16", "fp32") else None
        if peak is None or bw is None:
            break
        eff = SIMT_EFFICIENCY if s.dtype == "fp32" else FUSED_ATTENTION_EFFICIENCY
        flops = 4.0 * s.bh * s.sq * s.sk * s.d * (s.forward + BACKWARD_FLOPS_FACTOR * s.backward)
        # Q, K, V, O once forward; backward reads Q, K, V, O, dO and writes dQ, dK, dV
        moved = _BYTES[s.dtype] * s.bh * s.d * (2 * s.sq + 2 * s.sk) * (s.forward + 2 * s.backward)
        compute_ns = flops / (peak * eff * 1e12) * 1e9
        bytes_ns = moved / (bw * BANDWIDTH_EFFICIENCY * 1e12) * 1e9
        total_ns += max(compute_ns, bytes_ns)
        parts.append(
            f"[{s.bh}×{s.sq}×{s.sk}, head dim {s.d}, {s.dtype}] {s.forward} fwd + {s.backward} bwd: "
            f"{flops / 1e12:.2f} TFLOP at {eff:.0%} of the {s.dtype} peak ({peak:g} TFLOP/s) = "
            f"{compute_ns / 1e6:.2f} ms, Q/K/V/O bytes at {BANDWIDTH_EFFICIENCY:.0%} of {bw:g} TB/s = {bytes_ns / 1e6:.2f} ms"
        )
    else:
        if parts:
            return int(total_ns), "the fused kernel at the larger of its FLOPs and bytes: " + "; ".join(parts)
    # No shapes or no peaks: the fused kernel is taken to cost what the two matmuls cost today
    # (it does their FLOPs at least as fast); the passes over the score matrix are the saving.
    why = "no shapes recorded" if not sub.scores else f"no peak figures ({ctx.device.describe()})"
    return gemm_ns, f"{why}: the fused kernel taken to cost what the subgraph's GEMM kernels cost today"


def attention_fix(model: device_model.DeviceModel, dtype: str | None) -> str:
    """SDPA, with the backend this device and dtype allow."""
    base = (
        "Use torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., dropout_p=..., "
        'is_causal=...) instead of matmul, softmax, matmul (Hugging Face, where the model supports it: '
        'from_pretrained(..., attn_implementation="sdpa")); pass a causal mask as is_causal=True '
        "rather than a mask tensor, an additive bias as attn_mask"
    )
    backends = model.features.sdpa_backends
    half = dtype in ("bf16", "fp16")
    if model.vendor == "nvidia" and model.known:
        fused = [b for b in ("cudnn", "flash") if b in backends]
        if fused and half:
            return base + f": on {model.architecture} it runs fused {'/'.join(fused)} attention kernels for {dtype}."
        if fused:
            return base + (
                f": in {dtype or 'this dtype'} it uses the memory-efficient kernel; with bf16/fp16 inputs "
                f"(autocast) it can use flash attention ({model.architecture})."
            )
        return base + f": {model.architecture} has no flash attention (it needs sm80+); SDPA uses the memory-efficient kernel."
    if model.vendor == "amd" and model.known:
        if "flash" in backends:
            return base + ": on ROCm it runs the fused flash / memory-efficient kernels (AOTriton or Composable Kernel)" + (
                "." if half else "; flash needs bf16/fp16 inputs."
            )
        return base + f": on {model.architecture} SDPA may fall back to its math path; check which backend it picks."
    return base + "; which fused backend SDPA picks on this device is not known."


def _kernel_evidence(kern: pl.DataFrame, limit: int = 5) -> tuple[KernelEvidence, ...]:
    top = (
        kern.group_by("name")
        .agg(pl.len().alias("calls"), pl.col("dur_ns").sum(), pl.col("tensor_core").first())
        .sort(["dur_ns", "name"], descending=[True, False])
        .head(limit)
    )
    return tuple(
        KernelEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["dur_ns"]), tensor_core=r["tensor_core"])
        for r in top.iter_rows(named=True)
    )


def _host_part(ctx: FindingContext, sub: Subgraph) -> tuple[tuple[int, ...], float]:
    """The outermost host ops that launched only subgraph kernels, and the share of their host
    time one fused call per attention keeps (two calls, forward and backward, per attention)."""
    calls = sum(s.forward + s.backward for s in sub.scores)
    if not calls:
        return (), 1.0
    launched = ctx.trace.kernels.filter(pl.col("top_op_id").is_not_null()).group_by("top_op_id").agg(pl.len().alias("all"))
    mine = sub.kernels.filter(pl.col("top_op_id").is_not_null()).group_by("top_op_id").agg(pl.len().alias("n"))
    only = mine.join(launched, on="top_op_id").filter(pl.col("n") == pl.col("all"))["top_op_id"].to_list()
    if not only:
        return (), 1.0
    return tuple(int(i) for i in only), min(1.0, calls / len(only))


def detect_eager_attention(ctx: FindingContext) -> Estimate | None:
    if ctx.kernels is None:
        return None
    sub = find_subgraph(ctx)
    if sub is None:
        return None
    kern = sub.kernels
    all_ns = int(kern["dur_ns"].sum())
    if all_ns <= 0:
        return None
    fused_ns, how = _fused_cost(ctx, sub)
    fused_ns = min(fused_ns, all_ns)
    window_ns = _in_window_ns(ctx, kern)
    saving = (all_ns - fused_ns) * window_ns / all_ns
    gpu_ns = ctx.kernels.total_ns
    share = 100.0 * all_ns / gpu_ns if gpu_ns else 0.0
    dtype = sub.scores[0].dtype if sub.scores else None
    shaped = bool(sub.scores)
    peaks = shaped and not how.startswith("no peak")
    families = ", ".join(sorted(set(kern["family"].fill_null("other").to_list())))
    # The scale, mask, softmax and cast kernels between the two matmuls are also chains a
    # generic fusion would claim: SDPA is the narrower fix for them, so the fusion finding
    # counts only what it adds on top of it (and is replayed after it).
    memory_ns = int(kern.filter(pl.col("family").is_in(list(MEMORY_FAMILIES)))["dur_ns"].sum())
    return estimate(
        ctx,
        "eager_attention",
        {"compute": saving},
        within_parts=(("compute", "unfused_elementwise", int(memory_ns * window_ns / all_ns)),),
        confidence="high" if peaks else "medium" if shaped else "low",
        confidence_reason=(
            "softmax between two matmuls whose shapes match (the score matrix), kernels of every op on it"
            if shaped
            else "softmax kernels between GEMM kernels, recurring, no fused attention kernel; no shapes to confirm"
        ),
        method=(
            f"the attention subgraph's kernels ({len(kern)} kernels: {families}; {all_ns / 1e6:.2f} ms, "
            f"{share:.0f} % of GPU kernel time) minus one fused kernel: {how}"
        ),
        fix=attention_fix(ctx.device, dtype),
        evidence=Evidence(
            kernels=_kernel_evidence(kern),
            ops=sub.ops,
            locations=ctx.locations_of(list(SOFTMAX_OPS)),
            figures=(
                ("attention_subgraph_ns", float(all_ns)),
                ("share_of_kernel_time_pct", round(share, 2)),
                ("fused_estimate_ns", float(fused_ns)),
            ),
        ),
        transforms=(
            FuseKernels(
                tuple(int(i) for i in kern["id"].to_list()), int(fused_ns), "attention subgraph", *_host_part(ctx, sub)
            ),
        ),
    )
