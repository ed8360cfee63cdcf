"""Serving engines' iterations: the batches a vLLM, SGLang or xDiT run executed, each with its
latency and, where the engine's annotation gives the token counts, its tokens per second.

The engines mark each scheduled batch with a ``record_function`` span on the host whose name
carries the batch:

- ``execute_{tokens}_context_{requests}(sq{new}sk{kv}sqsq…sqsk…)_generation_{requests}(sq{new}sk{kv}…)``
  (vLLM's and SGLang's model runners, as profiled in the traces TraceLens ships): the tokens
  scheduled, and per phase the requests, their new (query) tokens and the KV tokens attended;
- ``step[DECODE bs=32]`` (SGLang's scheduler): the mode and the batch size;
- ``execute_diffusion_{batch}_{height}x{width}`` (xDiT): the images in the batch and their size.

An iteration's latency runs from the span's start on the host to the end of the last device
work launched inside it (graph replays included): what a request waits for that batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceinsight.analysis.core.base import NO_INPUTS, AnalysisConfig, AnalysisSpec, Inputs, Result
from traceinsight.trace.model import Trace

_EXECUTE = (
    r"^execute_(?P<tokens>\d+)_context_(?P<context>\d+)\(sq(?P<context_new>\d+)sk(?P<context_kv>\d+)[^)]*\)"
    r"_generation_(?P<generation>\d+)\(sq(?P<generation_new>\d+)sk(?P<generation_kv>\d+)[^)]*\)"
)
_STEP = r"^step\[(?P<mode>[A-Za-z_]+) bs=(?P<batch>\d+)\]"
_DIFFUSION = r"^execute_diffusion_(?P<batch>\d+)_(?P<height>\d+)x(?P<width>\d+)"
ITERATION_COLUMNS: dict[str, pl.DataType | type[pl.DataType]] = {
    "iteration": pl.Int64,
    "name": pl.String,
    "phase": pl.String,  # prefill, decode, mixed (both in one batch), diffusion, or the engine's mode
    "requests": pl.Int64,
    "tokens": pl.Int64,  # tokens scheduled (new tokens of every request)
    "prefill_tokens": pl.Int64,
    "decode_tokens": pl.Int64,
    "kv_tokens": pl.Int64,  # KV-cache tokens attended, summed over requests
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,  # end of the last device work launched inside the span
    "latency_ns": pl.Int64,
    "device_ns": pl.Int64,  # device work launched inside the span (kernels, copies)
    "tokens_per_s": pl.Float64,
}


@dataclass(frozen=True)
class ServingResult(Result):
    name = "serving"
    engine_format: str | None = None  # which annotation the iterations were read from
    iterations: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ITERATION_COLUMNS))
    tokens: int | None = None
    latency_ns: int = 0  # summed over the iterations
    tokens_per_s: float | None = None  # all tokens over all latency (iterations do not overlap)

    def to_polars(self) -> pl.DataFrame:
        return self.iterations


def _spans(trace: Trace) -> tuple[pl.DataFrame, str | None]:
    ev = trace.events.filter(pl.col("kind") == "user_annotation").select(
        "id", "pid", "tid", "ts_ns", "end_ns", pl.col("name").cast(pl.String)
    )
    execute = ev.filter(pl.col("name").str.contains(_EXECUTE))
    if execute.height:
        parts = execute.with_columns(pl.col("name").str.extract_groups(_EXECUTE).alias("m")).unnest("m")
        ints = ["tokens", "context", "context_new", "context_kv", "generation", "generation_new", "generation_kv"]
        parts = parts.with_columns([pl.col(c).cast(pl.Int64) for c in ints])
        phase = (
            pl.when((pl.col("context") > 0) & (pl.col("generation") > 0)).then(pl.lit("mixed"))
            .when(pl.col("context") > 0).then(pl.lit("prefill"))
            .otherwise(pl.lit("decode"))
        )
        return parts.select(
            "id", "pid", "tid", "ts_ns", "end_ns", "name",
            phase.alias("phase"),
            (pl.col("context") + pl.col("generation")).alias("requests"),
            "tokens",
            pl.col("context_new").alias("prefill_tokens"),
            pl.col("generation_new").alias("decode_tokens"),
            (pl.col("context_kv") + pl.col("generation_kv")).alias("kv_tokens"),
        ), "execute_{tokens}_context_…_generation_… (vLLM / SGLang model runner)"
    step = ev.filter(pl.col("name").str.contains(_STEP))
    if step.height:
        parts = step.with_columns(pl.col("name").str.extract_groups(_STEP).alias("m")).unnest("m")
        return parts.select(
            "id", "pid", "tid", "ts_ns", "end_ns", "name",
            pl.col("mode").str.to_lowercase().alias("phase"),
            pl.col("batch").cast(pl.Int64).alias("requests"),
            # a decode step makes one token per request
            pl.when(pl.col("mode").str.to_uppercase() == "DECODE").then(pl.col("batch").cast(pl.Int64)).alias("tokens"),
            pl.lit(None, pl.Int64).alias("prefill_tokens"),
            pl.when(pl.col("mode").str.to_uppercase() == "DECODE").then(pl.col("batch").cast(pl.Int64)).alias("decode_tokens"),
            pl.lit(None, pl.Int64).alias("kv_tokens"),
        ), "step[MODE bs=N] (SGLang scheduler)"
    diffusion = ev.filter(pl.col("name").str.contains(_DIFFUSION))
    if diffusion.height:
        parts = diffusion.with_columns(pl.col("name").str.extract_groups(_DIFFUSION).alias("m")).unnest("m")
        return parts.select(
            "id", "pid", "tid", "ts_ns", "end_ns", "name",
            pl.lit("diffusion").alias("phase"),
            pl.col("batch").cast(pl.Int64).alias("requests"),
            *(pl.lit(None, pl.Int64).alias(c) for c in ("tokens", "prefill_tokens", "decode_tokens", "kv_tokens")),
        ), "execute_diffusion_{batch}_{H}x{W} (xDiT)"
    return pl.DataFrame(), None


def run(trace: Trace, config: AnalysisConfig, inputs: Inputs = NO_INPUTS) -> ServingResult:
    spans, source = _spans(trace)
    if source is None:
        return ServingResult(
            available=False,
            reason="no serving-engine iteration spans (vLLM/SGLang execute_…, SGLang step[…], xDiT execute_diffusion_…)",
        )
    spans = spans.sort("ts_ns").with_columns(iteration=pl.int_range(pl.len(), dtype=pl.Int64))
    work = (
        trace.kernels.filter(pl.col("launch_ts_ns").is_not_null())
        .select("launch_ts_ns", "launch_tid", "ts_ns", "end_ns", "dur_ns")
        .sort("launch_ts_ns")
    )
    inside = work.join_asof(
        spans.select("iteration", pl.col("tid").alias("launch_tid"), pl.col("ts_ns").alias("span_ts"), pl.col("end_ns").alias("span_end")),
        left_on="launch_ts_ns", right_on="span_ts", by="launch_tid", strategy="backward", check_sortedness=False,
    ).filter(pl.col("launch_ts_ns") <= pl.col("span_end"))
    per = inside.group_by("iteration").agg(pl.col("end_ns").max().alias("last_ns"), pl.col("dur_ns").sum().alias("device_ns"))
    table = (
        spans.join(per, on="iteration", how="left")
        .with_columns(
            start_ns=pl.col("ts_ns"),
            end_ns=pl.max_horizontal("end_ns", pl.col("last_ns").fill_null(pl.col("end_ns"))),
            device_ns=pl.col("device_ns").fill_null(0),
        )
        .with_columns(latency_ns=pl.col("end_ns") - pl.col("start_ns"))
        .with_columns(
            tokens_per_s=pl.when(pl.col("latency_ns") > 0).then(pl.col("tokens") * 1e9 / pl.col("latency_ns"))
        )
        .select([pl.col(c).cast(t) for c, t in ITERATION_COLUMNS.items()])
    )
    total_latency = int(table["latency_ns"].sum())
    known = table.filter(pl.col("tokens").is_not_null())
    tokens = int(known["tokens"].sum()) if known.height else None
    rate = tokens * 1e9 / float(known["latency_ns"].sum()) if tokens and int(known["latency_ns"].sum()) > 0 else None
    return ServingResult(
        engine_format=source, iterations=table, tokens=tokens, latency_ns=total_latency, tokens_per_s=rate
    )


SPEC = AnalysisSpec(
    name="serving",
    title="Serving iterations",
    run=run,
    description="A serving engine's batches (vLLM, SGLang, xDiT annotations): phase, requests, tokens, latency and tokens per second.",
)
