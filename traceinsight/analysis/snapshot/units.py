"""Byte counts as people read them, for the sentences the analyses write (advice, reasons)."""

from __future__ import annotations


def fmt_bytes(value: int | float) -> str:
    """Binary units with one decimal, as the renderers write them: 512 B, 1.5 KiB, 3.2 GiB."""
    size = float(value)
    sign = "-" if size < 0 else ""
    size = abs(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            if unit == "B":
                return f"{sign}{int(size)} B"
            return f"{sign}{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
