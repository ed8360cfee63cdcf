"""What the traced program does: training, inference, or token-by-token decoding.

Advice depends on it: a fused optimizer, ``zero_grad`` or DDP buckets mean nothing to a
model that never runs backward, and "larger batches" is no answer to the latency of one
generated token. Read from the trace alone, strongest evidence first:

1. **training**: autograd's backward (``autograd::engine::evaluate_function``, ``*Backward0``
   ops, ``aten::*_backward``), an optimizer step or ``zero_grad`` (``Optimizer.step#…``),
   fused optimizer ops, or backward/optimizer kernels where the trace has no host ops;
2. **decode**: an inference server's frames or ops (vLLM, SGLang, TGI, TensorRT-LLM,
   LMDeploy: ``serving``), Hugging Face ``generate``, or the shape of a decode loop: most
   attention calls, many of them, take one query token against a longer key/value cache
   (small-batch GEMV-like matmuls alone do not tell decoding from any small-batch inference);
3. **inference**: host ops and none of the above (diffusion or other engines that batch
   requests are ``serving`` too);
4. **unknown**: nothing to read (a trace of GPU activity only, without backward kernels).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import polars as pl

from traceinsight.trace.model import Trace
from traceinsight.trace.training import TRAINING_KERNEL, TRAINING_OP

Kind = Literal["training", "inference", "decode", "unknown"]

# Engines that serve many requests: their frames, ops or kernels carry their names.
SERVING = {
    "vLLM": r"(^|/)vllm/|^vllm::|vllm::",
    "SGLang": r"(^|/)sglang/|^sglang",
    "TGI": r"text_generation_server",
    "TensorRT-LLM": r"tensorrt_llm",
    "LMDeploy": r"(^|/)lmdeploy/",
    "xDiT": r"(^|/)xfuser/|xFuser",
}
# Engines among them that generate tokens (the others serve diffusion and the like).
TOKEN_ENGINES = ("vLLM", "SGLang", "TGI", "TensorRT-LLM", "LMDeploy")
HF_GENERATE = r"generation/utils\.py\(\d+\): (generate|_sample|_greedy_search|_beam_search)"
ATTENTION_OPS = r"^aten::(scaled_dot_product_attention|_scaled_dot_product_\w+_attention)$"
# A decode loop: at least this share of attention calls, and this many, take one query token
# (one call per generated token and layer).
DECODE_SHARE = 0.5
DECODE_MIN_REPEATS = 32


@dataclass(frozen=True)
class Workload:
    kind: Kind
    serving: bool = False  # an engine that batches requests (vLLM, SGLang, xDiT, ...)
    engine: str | None = None
    evidence: str = ""

    @property
    def training(self) -> bool:
        return self.kind == "training"

    @property
    def inference(self) -> bool:
        """Forward passes only (decode included)."""
        return self.kind in ("inference", "decode")

    def describe(self) -> str:
        what = {"training": "training", "inference": "inference", "decode": "token-by-token decoding", "unknown": "unknown workload"}[self.kind]
        if self.engine:
            what += f" ({self.engine}{' serving' if self.serving else ''})"
        return f"{what}: {self.evidence}" if self.evidence else what


def _names(trace: Trace, kinds: list[str]) -> pl.DataFrame:
    # grouped by the categorical name, then cast: the distinct names, not every event
    return (
        trace.events.lazy()
        .filter(pl.col("kind").cast(pl.String).is_in(kinds))
        .group_by("name")
        .len()
        .with_columns(pl.col("name").cast(pl.String))
        .collect()
    )


def _first(names: pl.DataFrame, pattern: str) -> str | None:
    hit = names.filter(pl.col("name").str.contains(pattern)).sort(["len", "name"], descending=[True, False])
    return None if hit.height == 0 else str(hit["name"][0])


def _one_query(dims: str | None, name: str) -> bool | None:
    """Whether an attention call takes one query token against a longer key/value cache
    (None: not an attention call this can read). SDPA's inputs are [B, H, S, D]; a 4-D
    matmul is eager attention: [B, H, 1, D] @ [B, H, D, L] or [B, H, 1, L] @ [B, H, L, D]."""
    try:
        parsed = json.loads(dims) if dims else None
    except ValueError:
        return None
    if not isinstance(parsed, list) or len(parsed) < 2:
        return None
    q, k = parsed[0], parsed[1]
    if not (isinstance(q, list) and isinstance(k, list) and len(q) == 4 == len(k)):
        return None
    if not all(isinstance(d, int) for d in (*q, *k)):
        return None
    if name == "aten::matmul":
        return bool(q[2] == 1 and q[3] == k[2] and k[3] > 1 and q[:2] == k[:2])
    return bool(q[2] == 1 and k[2] > 1)


def _decode_shape(trace: Trace) -> str | None:
    """Evidence of a decode loop in the shapes: attention calls that take one query token
    against a longer key/value cache (a KV cache read once per generated token), most of them
    and many times. Small-batch GEMV-like matmuls alone are not enough: any small-batch
    inference has them."""
    name = pl.col("name").cast(pl.String)
    calls = (
        trace.events.filter(
            (pl.col("kind").cast(pl.String) == "cpu_op")
            & (name.str.contains(ATTENTION_OPS) | (name == "aten::matmul"))
            & pl.col("input_dims").is_not_null()
        )
        .group_by(name.alias("name"), "input_dims")
        .len()
    )
    one = [_one_query(d, n) for n, d in zip(calls["name"].to_list(), calls["input_dims"].to_list(), strict=True)]
    calls = calls.with_columns(one=pl.Series(one, dtype=pl.Boolean)).drop_nulls("one")
    # Eager attention's matmuls count only where some take one query token.
    attention = calls.filter((pl.col("name") != "aten::matmul") | pl.col("one"))
    total = int(attention["len"].sum() or 0)
    single = int(attention.filter(pl.col("one"))["len"].sum() or 0)
    if single >= DECODE_MIN_REPEATS and single >= DECODE_SHARE * total:
        return f"{single} of {total} attention calls take one query token against a longer key/value cache"
    return None


def detect(trace: Trace) -> Workload:
    """The workload this trace records (see the module's docstring for the rules)."""
    host = _names(trace, ["cpu_op", "user_annotation", "python"])
    found = _first(host, TRAINING_OP)
    if found is not None:
        return Workload("training", evidence=f"backward or optimizer ops ({found})")
    kernels = _names(trace, ["kernel"])
    found = _first(kernels, TRAINING_KERNEL)
    if found is not None:
        return Workload("training", evidence=f"backward or optimizer kernels ({found[:60]})")
    # Host frames first: one engine's kernels can carry another's name (SGLang runs vLLM's).
    for names in (host, kernels):
        for engine, pattern in SERVING.items():
            found = _first(names, pattern)
            if found is None:
                continue
            kind: Kind = "decode" if engine in TOKEN_ENGINES else "inference"
            return Workload(kind, serving=True, engine=engine, evidence=f"{engine} frames or ops ({found[:60]})")
    if host.height == 0:
        return Workload("unknown", evidence="no host ops in the trace")
    found = _first(host, HF_GENERATE)
    if found is not None:
        return Workload("decode", engine="Hugging Face generate", evidence=found)
    shape = _decode_shape(trace)
    if shape is not None:
        return Workload("decode", evidence=shape)
    return Workload("inference", evidence="forward ops only: no backward, optimizer or decode loop")

