"""Which part a generically named GPU is, from what the trace itself shows.

ROCm sometimes reports a device as just "AMD Radeon Graphics". With ``gcnArchName`` and the
CU count, :func:`traceinsight.analysis.device.peaks.infer_part_name` tells the part; without them the
kernels can still give the ISA away: Tensile GEMM kernels and many hipcc-built kernels carry
the target in their names (``Cijk_..._MT128x128x32_..._gfx942``). Kernel names only tell the
ISA, not the exact part, so this is the last resort, and the reason says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from traceinsight.analysis.device import peaks as devices

# ISA → (series, the table's part taken for its peaks). An ISA spans a series: MI210, MI250
# and MI250X are all gfx90a; the MI250 figures sit between them (one GCD each on MI250/X).
_ISA_PARTS: dict[str, tuple[str, str]] = {
    "gfx90a": ("MI200 series", "AMD Instinct MI250"),
    "gfx942": ("MI300 series", "AMD Instinct MI300X"),
}
# The ISA as a whole token: gfx942 but not gfx9420, after _ or a non-alphanumeric.
_ISA_TOKEN = r"(?:^|[^0-9a-z])(gfx[0-9]+[a-z]?)(?:$|[^0-9a-z])"


@dataclass(frozen=True)
class PartGuess:
    """A part name the device table matches, and where it came from (for the match reason)."""

    part: str
    source: str
    from_kernel_names: bool = False


def isa_counts(kernel_names: pl.Series) -> pl.DataFrame:
    """Distinct kernel names per ``gfx…`` ISA named in them (columns ``isa``, ``kernels``, ``example``)."""
    names = kernel_names.cast(pl.String).drop_nulls().unique().str.to_lowercase()
    found = pl.DataFrame({"name": names}).with_columns(isa=pl.col("name").str.extract(_ISA_TOKEN, 1))
    return (
        found.filter(pl.col("isa").is_not_null())
        .group_by("isa")
        .agg(kernels=pl.len(), example=pl.col("name").sort().first())
        .sort(["kernels", "isa"], descending=[True, False])
    )


def part_from_kernel_names(kernel_names: pl.Series) -> PartGuess | None:
    """The part named by the ISA in the kernel names; None when no known ISA appears, or
    when the names disagree on it (two targets in one process is not one device)."""
    counts = isa_counts(kernel_names)
    if counts.height != 1:
        return None
    isa, n, example = counts.row(0)
    known = _ISA_PARTS.get(str(isa))
    if known is None:
        return None
    series, part = known
    return PartGuess(
        part=part,
        source=f"kernel names ({n} name {isa}, e.g. {example!r}): {series}, peaks of {part} assumed",
        from_kernel_names=True,
    )


def infer_part(name: str | None, raw: dict[str, Any] | None, kernel_names: pl.Series) -> PartGuess | None:
    """A part for a device whose reported name the table does not know: from ``gcnArchName`` and
    the CU count first, else (no ``gcnArchName`` at all) from the ISA in the kernel names."""
    if devices.lookup(name) is not None:
        return None
    by_arch = devices.infer_part_name(name, raw)
    if by_arch is not None:
        arch = (raw or {}).get("gcnArchName")
        return PartGuess(part=by_arch, source=f"gcnArchName {arch!r}")
    if (raw or {}).get("gcnArchName"):
        return None  # the device said its ISA; a kernel name must not overrule it
    return part_from_kernel_names(kernel_names)


# NVIDIA parts by name → compute capability, for devices whose entry carries no capability.
_NVIDIA_NAME_CC: tuple[tuple[str, tuple[int, int]], ...] = (
    (r"(?i)\bG?B[12]00\b|\bGB[23]00\b", (10, 0)),
    (r"(?i)\bG?H[12]00\b|\bH[28]00\b|\bH20\b", (9, 0)),
    (r"(?i)\bL40S?\b|\bL4\b|RTX 40\d0|RTX 6000 Ada", (8, 9)),
    (r"(?i)\bA[18]00\b|\bA30\b", (8, 0)),
    (r"(?i)\bA10G?\b|\bA40\b|RTX A6000|RTX 30\d0", (8, 6)),
    (r"(?i)\bT4\b|RTX 20\d0|Quadro RTX", (7, 5)),
    (r"(?i)V100|TITAN V\b", (7, 0)),
)
# Kernels built for one SM: sm80_xmma_gemm..., nvjet_sm90_..., cutlass_80_tensorop_...,
# ampere_sgemm_... (cuBLAS names its pre-Hopper kernels by architecture).
_SM_TOKEN = r"(?:^|[^0-9A-Za-z])(?:sm_?|cutlass_)([1-9][0-9])[a]?_"
_ARCH_PREFIX_CC = {"volta": 70, "turing": 75, "ampere": 80, "hopper": 90}


def nvidia_cc_from_name(name: str | None) -> tuple[int, int] | None:
    """The compute capability an NVIDIA part name implies (None: not a part listed here)."""
    for pattern, cc in _NVIDIA_NAME_CC:
        if name and re.search(pattern, name):
            return cc
    return None


def nvidia_cc_from_kernel_names(kernel_names: pl.Series) -> tuple[int, int] | None:
    """The newest SM that kernel names say they were built for. cuBLAS runs sm80 kernels on
    later parts too, so this is a lower bound on the device's capability."""
    names = pl.DataFrame({"name": kernel_names.cast(pl.String).drop_nulls().unique()})
    got = names.select(
        sm=pl.col("name").str.extract(_SM_TOKEN, 1).cast(pl.Int64, strict=False),
        arch=pl.col("name").str.extract(r"^(volta|turing|ampere|hopper)_", 1).replace_strict(
            _ARCH_PREFIX_CC, default=None, return_dtype=pl.Int64
        ),
    )
    best = pl.concat([got["sm"], got["arch"]]).drop_nulls()
    best = best.filter((best >= 60) & (best <= 129))
    if best.len() == 0:
        return None
    top = int(best.max())  # type: ignore[arg-type]
    return top // 10, top % 10
