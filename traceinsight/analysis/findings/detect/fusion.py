"""unfused_elementwise: recurring chains of memory-bound kernels that one fused kernel could do.

Every kernel of an eager chain (bias add, activation, residual add, normalisation pieces,
casts) reads its input from device memory and writes its output back. One fused kernel reads
the chain's external inputs and writes its output once. The fused kernel's time is bounded
below by those bytes at the device's streaming bandwidth: the first kernel's inputs and the
last kernel's output, taken as half of what each of them moves (an elementwise kernel reads
about what it writes), from the ops' recorded shapes and dtypes, else from the kernel's own
duration (it ran at streaming speed). The saving is the chain's kernel time minus that, over
every occurrence; where the kernels waited for their launches, the idle between them goes too
(one launch instead of many), counted here and given up by launch_bound.

Chains made only of Inductor kernels are the compiler's own fusion decisions (a reduction
whose result a second pass needs, a graph break): they are not candidates here.
"""

from __future__ import annotations

import polars as pl

from traceinsight.analysis.findings.catalogue import BANDWIDTH_EFFICIENCY
from traceinsight.analysis.findings.detect.launches import launch_waits
from traceinsight.analysis.findings.model import (
    Confidence,
    Evidence,
    KernelEvidence,
    OpEvidence,
    Pool,
)
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.chains import (
    MIN_CHAIN_KERNELS,
    MIN_OCCURRENCES,
    find_chains,
)
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.fuse import FuseChains

# What the chain does, from its kernels' and ops' names, for the fused kernel to name.
# a normalization written out (x * rsqrt(mean(x²) + eps)); a kernel named for a norm is one already
_NORM = r"(?i)rsqrt|sqrt_kernel|aten::sqrt"
_GELU = r"(?i)gelu|tanh|\berf\b|aten::erf"
_SILU = r"(?i)silu|sigmoid"
_ROTARY = r"(?i)rotary|\brope\b|_rope_"
_NEG = r"(?i)neg_kernel|aten::neg"
_CAT = r"(?i)CatArrayBatchedCopy|aten::cat"
# Sequences holding at least this share of the saving name the fused kernels in the fix.
ADVICE_SHARE = 0.05
# The shortest elementwise kernels in the H100/H200 samples take 1.2-2 µs: no fused kernel is
# counted faster than this (or than the chain's shortest kernel, where that is shorter).
FUSED_FLOOR_NS = 2_000
# At least this share of the saving priced from recorded shapes makes a high confidence.
SHAPED_SHARE = 0.5


def _fused_ns(chains: pl.DataFrame, bw_tbps: float | None) -> pl.DataFrame:
    """Per chain: ``fused_ns`` (the one kernel's lower-bound time: the larger of the ends' bytes
    at the device's bandwidth and the chain's longest kernel), ``saving_ns`` and ``shaped``
    (both ends priced from recorded shapes)."""
    rate = None if bw_tbps is None else bw_tbps * 1e3 * BANDWIDTH_EFFICIENCY  # bytes per ns

    def end(bytes_col: str, ns_col: str) -> pl.Expr:
        # half of what the end kernel moves (its inputs, or its output), as time at the rate;
        # without shapes, half of its duration (it moved its bytes at streaming speed)
        if rate is None:
            return pl.col(ns_col) / 2
        return pl.when(pl.col(bytes_col).is_not_null() & (pl.col(bytes_col) > 0)).then(
            pl.col(bytes_col) / 2 / rate
        ).otherwise(pl.col(ns_col) / 2)

    # however few bytes, one kernel takes a launch's worth of device time: the chain's
    # shortest kernel, at most FUSED_FLOOR_NS
    floor = pl.min_horizontal(pl.col("min_ns"), pl.lit(FUSED_FLOOR_NS))
    # and never less than the chain's longest kernel: the fused kernel does that kernel's work
    # too. The two ends' bytes miss what a reduction inside the chain costs: a normalization's
    # statistics must be read before its output can be written, so a fused batch norm still
    # passes over its input twice, and its backward reads the input and the gradient again
    # (ResNet-50's batch-norm chains priced at the ends' bytes alone claimed 60 % of a bf16
    # training step, more than torch.compile gives such a step)
    fused = pl.max_horizontal(end("first_bytes", "first_ns") + end("last_bytes", "last_ns"), floor, pl.col("durs").list.max())
    shaped = (pl.col("first_bytes").fill_null(0) > 0) & (pl.col("last_bytes").fill_null(0) > 0) & pl.lit(rate is not None)
    return chains.with_columns(
        fused_ns=pl.min_horizontal(fused, pl.col("kernel_ns")).round().cast(pl.Int64), shaped=shaped
    ).with_columns(saving_ns=pl.col("kernel_ns") - pl.col("fused_ns"))


def _launch_idle(ctx: FindingContext, chains: pl.DataFrame) -> pl.DataFrame:
    """Per chain: the short idle (below the gap threshold) before its kernels, all but the
    first, that waited for their launch: back-to-back launches the device outran, which one
    launch instead of many removes. Longer launch-overhead gaps are the host's per-op cost,
    reported by launch_bound (its fix, compiling or graphs, covers them)."""
    threshold = max(ctx.gaps.threshold_ns, 1) if ctx.gaps is not None else 0
    waits = (
        launch_waits(ctx.trace)
        .filter(pl.col("waited") & (pl.col("idle_before_ns") < threshold))
        .select("device", "start_ns", "idle_before_ns")
    )
    inner = (
        chains.select("device", "stream", "chain", "starts")
        .with_columns(pl.col("starts").list.slice(1))
        .explode("starts")
        .rename({"starts": "start_ns"})
        .join(waits.unique(["device", "start_ns"]), on=["device", "start_ns"], how="inner")
        .group_by("device", "stream", "chain")
        .agg(pl.col("idle_before_ns").sum().alias("launch_idle_ns"))
    )
    return chains.join(inner, on=["device", "stream", "chain"], how="left").with_columns(
        pl.col("launch_idle_ns").fill_null(0)
    )


def _steady(ctx: FindingContext, chains: pl.DataFrame) -> pl.DataFrame:
    """Chains outside the spans the window assessment finds not steady state."""
    if ctx.window is None or ctx.window.excluded.height == 0:
        return chains
    spans = ctx.window.excluded.select(pl.col("start_ns").alias("x0"), pl.col("end_ns").alias("x1"))
    hit = (
        chains.select("device", "stream", "chain", "start_ns", "end_ns")
        .join(spans, how="cross")
        .filter((pl.col("start_ns") < pl.col("x1")) & (pl.col("x0") < pl.col("end_ns")))
        .select("device", "stream", "chain")
        .unique()
    )
    return chains.join(hit, on=["device", "stream", "chain"], how="anti")


def _top_kernels(chains: pl.DataFrame, key: str, limit: int = 8) -> tuple[KernelEvidence, ...]:
    """The kernels of the sequence ``key`` in chain order, with their time over its occurrences."""
    rows = (
        chains.filter(pl.col("key") == key)
        .select(pl.col("names").alias("name"), pl.col("durs").alias("dur_ns"))
        .with_columns(pos=pl.int_ranges(0, pl.col("name").list.len()))
        .explode("name", "dur_ns", "pos")
        .group_by("pos", maintain_order=True)
        .agg(pl.col("name").first(), pl.len().alias("calls"), pl.col("dur_ns").sum())
        .sort("pos")
    )
    return tuple(
        KernelEvidence(name=str(r["name"]), calls=int(r["calls"]), dur_ns=int(r["dur_ns"]), tensor_core=False)
        for r in rows.head(limit).iter_rows(named=True)
    )


def fusion_advice(ctx: FindingContext, sequences: list[str], *, with_compiled: bool = False) -> tuple[str, str]:
    """(fix, action) for the chains whose kernel and op names are ``sequences`` (one text
    per sequence, its names one a line); ``with_compiled``: Inductor's own kernels are among
    the chains' kernels."""
    text = "\n".join(sequences)
    # rotate_half written out: a negation and a concatenation in one sequence
    rotate_half = any(
        bool(pl.Series([seq]).str.contains(_NEG)[0]) and bool(pl.Series([seq]).str.contains(_CAT)[0]) for seq in sequences
    )
    vendor = ctx.device.vendor
    compile_line = (
        "torch.compile(model) fuses such chains into one Triton kernel each"
        + (" (Inductor generates them on ROCm as well)" if vendor == "amd" else "")
        if vendor in ("nvidia", "amd")
        else "torch.compile(model), where its backend supports this device, fuses such chains"
    )
    named: list[str] = []
    if pl.Series([text]).str.contains(_NORM)[0]:
        named.append(
            "a fused normalization instead of its formula (torch.nn.RMSNorm / torch.nn.functional.rms_norm, "
            "nn.LayerNorm"
            + (", or apex FusedRMSNorm / Liger Kernel's LigerRMSNorm" if vendor in ("nvidia", "amd") else "")
            + ")"
        )
    if pl.Series([text]).str.contains(_GELU)[0]:
        named.append("the activation as one op (torch.nn.functional.gelu(x, approximate='tanh'), not its formula)")
    if pl.Series([text]).str.contains(_SILU)[0]:
        named.append("SiLU and the gate product as one op (F.silu; a fused SwiGLU such as Liger's LigerSiLUMulFunction)")
    if rotate_half or pl.Series([text]).str.contains(_ROTARY)[0]:
        named.append("a fused rotary embedding (flash_attn's apply_rotary_emb, Liger's liger_rotary_pos_emb)")
    compiled = ctx.compile is not None and (ctx.compile.triton_share or 0.0) > 0
    if compiled and with_compiled:
        # Inductor's kernels inside the chains: the chains cross the edge of the compiled code,
        # where an op it does not compile splits them (a custom op inside the compiled graph, as
        # in vLLM's, a graph break, or code outside the compiled function)
        fix = (
            "Fuse the chains of elementwise and normalization kernels: torch.compile's own kernels are among them, "
            "so the chains cross the edge of the compiled code, where an op it does not compile splits them (a custom "
            "op, a graph break, or code outside the compiled function); compile that op's code too, or write it in "
            f"PyTorch, so that Inductor fuses across it: {compile_line}."
        )
        action = "let torch.compile fuse across the op that splits the chains"
    elif compiled:
        # the trace already runs Inductor's kernels: these chains are eager code beside them
        fix = (
            "Fuse the chains of elementwise and normalization kernels: they run outside the compiled graphs "
            f"(eager code beside torch.compile's kernels); compile the code that launches them too: {compile_line}."
        )
        action = "compile the eager code that runs the elementwise chains"
    else:
        fix = f"Fuse the chains of elementwise and normalization kernels: {compile_line}."
        action = "torch.compile(model) to fuse the elementwise chains"
    if named:
        fix += " Without compiling: " + "; ".join(named) + "."
    return fix, action


def detect_unfused_elementwise(ctx: FindingContext) -> Estimate | None:
    chains = find_chains(ctx.trace, ctx.device.vendor)
    chains = chains.filter(
        (pl.col("occurrences") >= MIN_OCCURRENCES)
        & ((pl.col("kernels") - pl.col("compiled")) >= MIN_CHAIN_KERNELS)
    )
    chains = _steady(ctx, chains)
    if chains.height == 0:
        return None
    chains = _launch_idle(ctx, _fused_ns(chains, ctx.mem_bw_tbps))
    saving = int(chains["saving_ns"].sum())
    idle = int(chains["launch_idle_ns"].sum())
    if saving + idle <= 0:
        return None
    kernel_ns = int(chains["kernel_ns"].sum())
    shaped_ns = int(chains.filter(pl.col("shaped"))["saving_ns"].sum())
    shaped_share = shaped_ns / saving if saving > 0 else 0.0
    patterns = (
        chains.group_by("key")
        .agg(
            pl.len().alias("occurrences"),
            pl.col("kernels").first(),
            pl.col("kernel_ns").sum(),
            pl.col("saving_ns").sum(),
            pl.col("names").first(),
            pl.col("op_names").first(),
            pl.col("compiled").max(),
        )
        .sort(["saving_ns", "key"], descending=[True, False])
    )
    top = patterns.row(0, named=True)
    top_ops = [o for o in top["op_names"] if o]
    # the sequences that hold a material part of the saving say what the fused kernels are
    named = patterns.filter(pl.col("saving_ns") >= ADVICE_SHARE * saving)
    fix, action = fusion_advice(
        ctx,
        ["\n".join(n for n in row["names"] + row["op_names"] if n) for row in named.iter_rows(named=True)],
        with_compiled=bool((named["compiled"] > 0).any()),
    )
    confidence: Confidence = "high" if shaped_share >= SHAPED_SHARE else "medium"
    reason = (
        f"{chains.height} chains of {patterns.height} recurring kernel sequences; "
        + (
            f"{shaped_share:.0%} of the saving priced from the ops' recorded shapes and dtypes"
            if shaped_share > 0
            else "no shapes recorded: the fused kernel's bytes are read off the first and last kernels' durations"
        )
        + "; which inputs are the chain's own intermediates the trace cannot tell, so the fused time is a lower bound"
    )
    if confidence == "high" and ctx.mem_bw_tbps is None:
        confidence = "medium"
    parts: list[tuple[Pool, str, int]] = [("idle", "launch_bound", idle)]
    copy_ns = int(chains["copy_ns"].sum())
    if copy_ns > 0:
        parts.append(("compute", "noncontiguous_copy", copy_ns))
    # to_list gives Python ints: no per-element conversion over tens of thousands of kernels
    transform = FuseChains(
        tuple(zip(map(tuple, chains["ids"].to_list()), chains["fused_ns"].cast(pl.Int64).to_list(), strict=True))
    )
    bw = ctx.mem_bw_tbps
    return estimate(
        ctx,
        "unfused_elementwise",
        {"compute": saving, "idle": idle},
        within_parts=tuple(parts),
        confidence=confidence,
        confidence_reason=reason,
        method=(
            "per stream, runs of ≥ 2 memory-bound kernels (elementwise, normalization, reduction, softmax, "
            "layout copies) between compute kernels, grouped by their kernel-name sequence and kept when the "
            "sequence recurs; each run replaced by one kernel that reads the first kernel's inputs and writes "
            "the last kernel's output once"
            + (f" at {BANDWIDTH_EFFICIENCY:.0%} of {bw:g} TB/s" if bw else " (no bandwidth known: at the speed the ends ran)")
            + ", never faster than the run's longest kernel; saving = the runs' kernel time minus the fused kernels' time, plus the idle between them "
            "where the kernels waited for their launches"
        ),
        title=f"{chains.height} chains of elementwise/normalization kernels could each run as one fused kernel "
        f"({kernel_ns / 1e6:.2f} ms of kernels)",
        fix=fix,
        action=action,
        evidence=Evidence(
            kernels=_top_kernels(chains, str(top["key"])),
            ops=tuple(OpEvidence(name=o, calls=int(top["occurrences"]), dur_ns=0) for o in dict.fromkeys(top_ops))[:8],
            locations=ctx.locations_of(list(dict.fromkeys(top_ops))),
            figures=(
                ("chains", float(chains.height)),
                ("patterns", float(patterns.height)),
                ("chain_kernel_ns", float(kernel_ns)),
                ("fused_ns", float(chains["fused_ns"].sum())),
                ("launch_idle_ns", float(idle)),
                ("top_pattern_kernels", float(top["kernels"])),
                ("top_pattern_occurrences", float(top["occurrences"])),
                ("top_pattern_saving_ns", float(top["saving_ns"])),
                ("shaped_saving_pct", round(100.0 * shaped_share, 2)),
            ),
        ),
        transforms=(transform,),
    )
