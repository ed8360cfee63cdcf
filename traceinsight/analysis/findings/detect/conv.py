"""Findings about convolutions: NCHW layout in 16-bit (channels_last), and a first convolution
whose input channels are off the tensor-core multiple (input_channels_padding).

Tensor-core convolution kernels (cuDNN's implicit GEMMs, MIOpen's igemm) read NHWC. A model in
NCHW (PyTorch's default layout) pays for it around every convolution: the library converts the
activations (cuDNN ``nchwToNhwcKernel`` / ``nhwcToNchwKernel``, MIOpen ``batched_transpose_*``)
and batch norm runs its NCHW kernels, which reduce over N·H·W per channel and are slower than
the channels_last ones. ``channels_last`` removes the conversions and switches batch norm.

The step gets shorter only where the device was on the critical path: the saving is the
replay of the step with the conversions (and their launches) removed and the NCHW batch-norm
kernels at the channels_last rate; where the replay does not explain the trace, the device
time those changes remove.
"""

from __future__ import annotations

import json
import re

import polars as pl

from traceinsight.analysis.classify import with_classes
from traceinsight.analysis.findings.model import Confidence, Evidence, KernelEvidence, OpEvidence
from traceinsight.analysis.findings.price.savings import Estimate, estimate
from traceinsight.analysis.findings.read.context import FindingContext
from traceinsight.analysis.whatif.model import whatif
from traceinsight.analysis.whatif.spans import RemoveSpans
from traceinsight.analysis.whatif.transforms import ScaleKernels, Transformation

# Layout conversions convolution libraries run around NHWC kernels for NCHW tensors.
LAYOUT_KERNELS = r"(?i)(nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw|batched_transpose)"
# Batch norm's NCHW kernels (PyTorch's own; cuDNN's bn_*_NCHW); the channels_last ones say so.
BN_NCHW_KERNELS = r"(?i)(at::native::batch_norm_[a-z_]*?(statistics|transform_input|backward|elemt|reduce)_kernel<|bn_\w+_NCHW)"
CHANNELS_LAST = r"(?i)channels_last|nhwc"
# Conversions of 32/64-bit data (MIOpen names the element width: half, dword) are not 16-bit work.
FULL_WIDTH = r"(?i)batched_transpose\w*(float|dword|double)"
CONV_OPS = r"^aten::(cudnn_|miopen_|mkldnn_)?convolution(_backward)?$"
FORWARD_CONV_OPS = r"^aten::(cudnn_|miopen_|mkldnn_)?convolution$"
HALF_TYPES = ("c10::BFloat16", "c10::Half")
# Batch-norm kernels in channels_last take this share of the NCHW ones' time. On the ResNet-50
# pairs (bf16) they took 0.46 on an H100 at batch 64 (15.6 → 7.2 ms per step) and 0.41 on an
# H200 at batch 256 (59.1 → 24.1 ms); the estimate assumes a little less of a gain, since the
# ratio depends on the shapes and the GPU.
BN_CHANNELS_LAST_FACTOR = 0.5
# Tensor cores take 16-bit channels in multiples of 8 (NHWC fast paths also take 4).
CHANNEL_MULTIPLE = 8
NHWC_MULTIPLE = 4


def _half_convs(ctx: FindingContext) -> pl.DataFrame:
    """Convolution ops whose first input is 16-bit (name, shapes, calls)."""
    ev = ctx.trace.events.select("kind", "name", "input_dims", "input_types")
    name = pl.col("name").cast(pl.String)
    types = pl.col("input_types").fill_null("")
    half = pl.any_horizontal(*(types.str.starts_with(f'["{t}"') for t in HALF_TYPES))
    return (
        ev.filter((pl.col("kind").cast(pl.String) == "cpu_op") & name.str.contains(CONV_OPS) & half)
        .group_by(name.alias("name"), pl.col("input_dims").alias("shapes"))
        .agg(pl.len().alias("calls"), pl.col("input_types").first().alias("types"))
        .sort(["calls", "name", "shapes"], descending=[True, False, False])
    )


def _classified(ctx: FindingContext) -> pl.DataFrame:
    assert ctx.kernels is not None
    table = ctx.kernels.kernels.select("name", "calls", "total_ns", "tensor_core")
    classes = with_classes(table.select("name"), vendor=ctx.device.vendor).select("name", "family", "precision")
    return table.join(classes, on="name", how="left")


def _kernel_evidence(rows: pl.DataFrame) -> tuple[KernelEvidence, ...]:
    return tuple(
        KernelEvidence(name=r["name"], calls=int(r["calls"]), dur_ns=int(r["total_ns"]), tensor_core=r["tensor_core"])
        for r in rows.sort(["total_ns", "name"], descending=[True, False]).head(4).iter_rows(named=True)
    )


def _half_tensor_cores(ctx: FindingContext, convs: pl.DataFrame) -> str | None:
    """The 16-bit precision of these convolutions when this device has tensor/matrix cores
    for it (None: it has none, or the device is unknown)."""
    types = " ".join(convs["types"].to_list()) if "types" in convs.columns else ""
    precision = "fp16" if "c10::Half" in types and "c10::BFloat16" not in types else "bf16"
    return precision if ctx.device.has_matrix(precision) else None


def _exactly(names: pl.Series) -> str:
    """A ScaleKernels target that selects exactly these kernel names."""
    return "name~^(" + "|".join(re.escape(str(n)) for n in names.to_list()) + ")$"


def detect_channels_last(ctx: FindingContext) -> Estimate | None:
    if ctx.kernels is None or ctx.window_ns <= 0:
        return None
    table = _classified(ctx)
    half_conv_kernels = table.filter(
        pl.col("family").str.starts_with("conv") & pl.col("precision").is_in(["bf16", "fp16"])
    )
    convs = _half_convs(ctx)
    if convs.height == 0 and half_conv_kernels.height == 0:
        return None
    if convs.height == 0 and not half_conv_kernels.filter(pl.col("precision") == "bf16").height:
        convs = convs.with_columns(types=pl.lit('["c10::Half"]'))
    precision = _half_tensor_cores(ctx, convs)
    if precision is None:
        return None
    layout = table.filter(
        pl.col("name").str.contains(LAYOUT_KERNELS)
        & ~pl.col("name").str.contains(FULL_WIDTH)
        & ~pl.col("precision").fill_null("unknown").is_in(["fp32", "fp64"])
    )
    bn = table.filter(pl.col("name").str.contains(BN_NCHW_KERNELS) & ~pl.col("name").str.contains(CHANNELS_LAST))
    layout_ns = int(layout["total_ns"].sum() or 0)
    if layout_ns <= 0:
        return None
    bn_ns = int(bn["total_ns"].sum() or 0)
    device_ns = layout_ns + int(bn_ns * (1 - BN_CHANNELS_LAST_FACTOR))
    k = ctx.trace.kernels
    names = layout["name"].unique().sort()
    launches = k.filter(pl.col("name").cast(pl.String).is_in(names.implode()))["launch_id"].drop_nulls()
    # the kernels by their exact names: the conversions go, with their launch calls, and batch
    # norm's NCHW kernels run at the channels_last rate
    transforms: tuple[Transformation, ...] = (
        RemoveSpans(tuple(int(i) for i in launches.unique().sort().to_list()), label="the layout conversions' launches"),
        ScaleKernels(_exactly(names), 0.0),
    )
    if bn.height:
        transforms += (ScaleKernels(_exactly(bn["name"].unique().sort()), BN_CHANNELS_LAST_FACTOR),)
    # The step shortens only where the device was on the critical path: replay it.
    replay = whatif(ctx.trace, transforms) if ctx.step_count > 0 else None
    replayed = replay is not None and replay.available and replay.explained and replay.before_ns > 0
    steps = max(ctx.step_count, 1)
    busy_ns = ctx.category_ns("compute", "memset")
    busy_share = f"{100 * device_ns / busy_ns:.0f} % of the GPU's busy time" if busy_ns > 0 else "of the GPU's busy time"
    if replay is not None and replayed:
        claim = min(device_ns, replay.saving_ns * steps) if ctx.steps is not None else device_ns
        how = (
            f"replay of the steps with the layout conversions and their launches removed and the NCHW batch-norm "
            f"kernels at {BN_CHANNELS_LAST_FACTOR:g} × their time: {replay.saving_ns / 1e6:.2f} ms per step of the "
            f"{device_ns / steps / 1e6:.2f} ms of device time this removes ({busy_share}); the rest lands where the GPU "
            "waited on something else (the host's launches, a collective's peers, kept as recorded), and becomes step "
            "time once the step is device-bound (larger batches, CUDA graphs)"
        )
        confidence: Confidence = "medium"
    else:
        busy = min(1.0, busy_ns / ctx.window_ns) if busy_ns > 0 else 1.0
        claim = int(device_ns * busy)
        how = (
            f"device time of the layout conversions plus {1 - BN_CHANNELS_LAST_FACTOR:.0%} of the NCHW batch-norm kernels' "
            f"time, times the share of the window the GPU was busy ({busy:.0%}): the replay does not explain this "
            "trace, so how much of it is on the critical path is estimated from how busy the device was"
        )
        confidence = "low"
    convs_text = f"{int(convs['calls'].sum())} 16-bit convolution calls" if convs.height else "16-bit convolution kernels"
    fix = (
        f"Run the convolutions in channels_last: model = model.to(memory_format=torch.channels_last) and each input "
        f"x = x.contiguous(memory_format=torch.channels_last) (torch.compile also picks the layout); "
        f"this GPU ({ctx.device.architecture}) has {precision} tensor cores, whose convolution kernels read NHWC, "
        "so the conversions go and batch norm runs its channels_last kernels."
    )
    return estimate(
        ctx,
        "channels_last",
        {"compute": claim},
        confidence=confidence,
        confidence_reason=f"{convs_text} on NCHW tensors: {layout['calls'].sum()} layout conversions "
        f"({layout_ns / steps / 1e6:.2f} ms per step)"
        + (f" and NCHW batch-norm kernels ({bn_ns / steps / 1e6:.2f} ms per step)" if bn_ns else "")
        + f"; the batch-norm gain ({1 - BN_CHANNELS_LAST_FACTOR:.0%}) is assumed, not measured here",
        method=how,
        evidence=Evidence(
            kernels=_kernel_evidence(pl.concat([layout, bn])),
            ops=tuple(OpEvidence(name=r["name"], shapes=r["shapes"], calls=int(r["calls"])) for r in convs.head(3).iter_rows(named=True)),
            figures=(
                ("layout_conversion_ns", float(layout_ns)),
                ("nchw_batch_norm_ns", float(bn_ns)),
                ("device_saving_ns", float(device_ns)),
                ("replayed_saving_ns", float(replay.saving_ns * steps) if replay is not None and replayed else -1.0),
            ),
        ),
        fix=fix,
        transforms=transforms,
    )


def _channels(shapes: str | None) -> int | None:
    try:
        dims = json.loads(shapes or "")
    except ValueError:
        return None
    x = dims[0] if isinstance(dims, list) and dims else None
    return int(x[1]) if isinstance(x, list) and len(x) >= 4 and isinstance(x[1], int) else None


def detect_input_channels_padding(ctx: FindingContext) -> Estimate | None:
    if ctx.kernels is None or ctx.window_ns <= 0:
        return None
    convs = _half_convs(ctx).filter(pl.col("name").str.contains(FORWARD_CONV_OPS))
    if convs.height == 0:
        return None
    precision = _half_tensor_cores(ctx, convs)
    if precision is None:
        return None
    convs = convs.with_columns(channels=pl.col("shapes").map_elements(_channels, return_dtype=pl.Int64))
    odd = convs.filter(pl.col("channels").is_not_null() & (pl.col("channels") % NHWC_MULTIPLE != 0) & (pl.col("channels") > 1))
    if odd.height == 0:
        return None
    channels = int(odd["channels"][0])
    padded = -(-channels // 4) * 4 if channels < 4 else -(-channels // CHANNEL_MULTIPLE) * CHANNEL_MULTIPLE
    # The kernels those convolutions ran (forward and backward): on tensor cores the library
    # already pads the channels itself (cuDNN nhwcAddPaddingKernel) and padding by hand moves
    # that cost rather than removing it: no saving is claimed (3 → 4 channels saved 0.5 % on an
    # H100 ResNet stem). Off tensor cores the saving is not known from the trace either.
    k = ctx.trace.kernels.filter(pl.col("op_name").cast(pl.String).str.contains(CONV_OPS))
    shapes = odd["shapes"].to_list()
    ops = ctx.trace.events.filter(
        (pl.col("kind").cast(pl.String) == "cpu_op") & pl.col("name").cast(pl.String).str.contains(CONV_OPS) & pl.col("input_dims").is_in(shapes)
    )
    own = k.filter(pl.col("op_id").is_in(ops["id"].implode()) | pl.col("top_op_id").is_in(ops["id"].implode()))
    own_ns = int(own["dur_ns"].sum() or 0)
    pads = own.filter(pl.col("name").cast(pl.String).str.contains(r"(?i)padding"))
    pad_ns = int(pads["dur_ns"].sum() or 0)
    steps = max(ctx.step_count, 1)
    return estimate(
        ctx,
        "input_channels_padding",
        {"compute": 0},
        confidence="low",
        confidence_reason=f"a {precision} convolution with {channels} input channels ({int(odd['calls'].sum())} calls; "
        f"its kernels {own_ns / steps / 1e6:.2f} ms per step"
        + (f", {pad_ns / steps / 1e6:.2f} ms of it the library padding the channels itself" if pad_ns else "")
        + "): the gain of padding is not measurable from the trace",
        method="no saving claimed: modern cuDNN/MIOpen pad a convolution's channels to the tensor-core multiple "
        "internally, so padding the input by hand moves that cost (measured: 3 → 4 channels on an H100 ResNet-50 "
        "stem saved 0.5 % of the step); it can pay where the padded input is built once (in the data pipeline)",
        evidence=Evidence(
            ops=tuple(OpEvidence(name=r["name"], shapes=r["shapes"], calls=int(r["calls"])) for r in odd.head(3).iter_rows(named=True)),
            figures=(("input_channels", float(channels)), ("conv_kernel_ns", float(own_ns)), ("library_padding_ns", float(pad_ns))),
        ),
        fix=f"Pad the input's channels with zeros ({channels} → {padded}, or → {-(-channels // CHANNEL_MULTIPLE) * CHANNEL_MULTIPLE}), "
        "ideally once in the data pipeline: torch.nn.functional.pad(x, (0, 0, 0, 0, 0, n)) and in_channels raised "
        "to match (the extra weight channels zero); expect little where the library already pads.",
    )
