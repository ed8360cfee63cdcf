"""Byte counts as people read them, for the sentences the analyses write (advice, reasons)."""

from __future__ import annotations


def fmt_bytes(value: int | float) -> str:
    """Binary units, three significant figures: 512 B, 1.50 KiB, 3.25 GiB."""
    size = float(value)
    sign = "-" if size < 0 else ""
    size = abs(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            if unit == "B":
                return f"{sign}{int(size)} B"
            return f"{sign}{size:.3g} {unit}" if size >= 100 else f"{sign}{size:.2f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
