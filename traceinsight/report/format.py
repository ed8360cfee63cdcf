"""Number formatting shared by the renderers: durations, sizes, percentages."""

from __future__ import annotations


def ns(value: float | int | None) -> str:
    """A duration in ns as a short human string (ns, µs, ms, s)."""
    if value is None:
        return "-"
    v = float(value)
    a = abs(v)
    if a < 1e3:
        return f"{v:.0f} ns"
    if a < 1e6:
        return f"{v / 1e3:.1f} µs"
    if a < 1e9:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e9:.3f} s"


def size(num_bytes: float | int | None) -> str:
    if num_bytes is None:
        return "-"
    v = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f} %"
