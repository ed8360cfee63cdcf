"""The written form of transformations, shared by ``traceinsight whatif`` and ``ti.whatif``.

- scale: ``TARGET=FACTOR``; TARGET a kernel family (``gemm``, ``attention_fwd``, ...) or
  ``name~REGEX``; FACTOR a multiplier of the time (``0.5``) or a speed-up (``2x``,
  ``2x faster``; ``2x slower`` doubles the time).
- remove: a regular expression of host span or device work names (``cudaStreamSynchronize``).
- host: ``FACTOR`` (all host time) or ``REGION=FACTOR`` (host time inside spans whose name
  matches the regular expression REGION).
"""

from __future__ import annotations

import re

from traceinsight.analysis.whatif.transforms import (
    CollapseLaunches,
    MakeAsync,
    OverlapComm,
    Remove,
    ScaleKernels,
    ShrinkHost,
    Transformation,
    TransformError,
)

_SPEED = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*[x×]\s*(faster|slower)?\s*$", re.IGNORECASE)


def parse_factor(text: str) -> float:
    """``0.5`` → 0.5 (time × 0.5); ``2x``/``2x faster`` → 0.5; ``2x slower`` → 2."""
    match = _SPEED.match(text)
    if match:
        speed = float(match.group(1))
        if speed <= 0:
            raise TransformError(f"bad factor {text!r}: a speed-up must be above 0")
        return speed if (match.group(2) or "").lower() == "slower" else 1.0 / speed
    try:
        value = float(text)
    except ValueError:
        raise TransformError(f"bad factor {text!r}: write a time multiplier (0.5) or a speed-up (2x, 2x faster)") from None
    if not (value >= 0 and value != float("inf")):
        raise TransformError(f"bad factor {text!r}: a time multiplier must be a finite number ≥ 0")
    return value


def _split(text: str, what: str) -> tuple[str, str]:
    target, sep, factor = text.rpartition("=")
    if not sep or not target.strip() or not factor.strip():
        raise TransformError(f"bad {what} {text!r}: write TARGET=FACTOR, e.g. gemm=0.5 or 'name~nccl=2x faster'")
    return target.strip(), factor.strip()


def parse_scale(text: str) -> ScaleKernels:
    target, factor = _split(text, "--scale")
    return ScaleKernels(target, parse_factor(factor))


def parse_host(text: str) -> ShrinkHost:
    if "=" not in text:
        return ShrinkHost(None, parse_factor(text))
    region, factor = _split(text, "--host")
    return ShrinkHost(region, parse_factor(factor))


def parse_remove(text: str) -> Remove:
    if not text.strip():
        raise TransformError("bad --remove '': name what to remove, e.g. cudaStreamSynchronize")
    try:
        re.compile(text)
    except re.error as exc:
        raise TransformError(f"bad --remove {text!r}: {exc}") from None
    return Remove(text)


def parse(
    scale: list[str] | tuple[str, ...] = (),
    remove: list[str] | tuple[str, ...] = (),
    host: list[str] | tuple[str, ...] = (),
    *,
    graphs: bool = False,
    overlap_comm: bool = False,
    async_copies: bool = False,
) -> tuple[Transformation, ...]:
    """The transformations written in the command's options, in a fixed order."""
    out: list[Transformation] = [parse_scale(s) for s in scale]
    out += [parse_remove(r) for r in remove]
    out += [parse_host(h) for h in host]
    if async_copies:
        out.append(MakeAsync())
    if graphs:
        out.append(CollapseLaunches())
    if overlap_comm:
        out.append(OverlapComm())
    return tuple(out)
