"""Which part a generically named GPU is, from what the trace itself shows.

ROCm sometimes reports a device as just "AMD Radeon Graphics". With ``gcnArchName`` and the
CU count, :func:`traceinsight.analysis.device.peaks.infer_part_name` tells the part; without them the
kernels can still give the ISA away: Tensile GEMM kernels and many hipcc-built kernels carry
the target in their names (``Cijk_..._MT128x128x32_..._gfx942``). Kernel names only tell the
ISA, not the exact part, so this is the last resort, and the reason says so.
"""

from __future__ import annotations

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
