"""Number formatting shared by the renderers: durations, sizes, percentages, by unit suffix."""

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


def number(value: float | int | None) -> str:
    """A plain number: integers with thousands separators, floats with 3 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "-"
    a = abs(value)
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 10 or a == 0:
        return f"{value:.1f}"
    return f"{value:.3g}"


def by_unit(key: str, value: object) -> str:
    """Format a value by the unit its name carries (``dur_ns``, ``bytes``, ``busy_pct`` ...)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        k = key.lower()
        if k.endswith("_ns") or k == "ns" or "_ns_per_" in k:
            return ns(value)
        if k.endswith("bytes") or k.endswith("_b"):
            return size(value)
        if k.endswith("_pct") or k.endswith("pct") or k.endswith("_percent"):
            return pct(float(value))
        if k == "share" or k.endswith("_share"):  # a fraction of 1
            return pct(100 * float(value))
        return number(value)
    if isinstance(value, (list, tuple)):
        text = ", ".join(str(v) for v in value[:6])
        return text + (", …" if len(value) > 6 else "")
    return str(value)


def label(key: str) -> str:
    """A column or field name as a header people read: ``dur_ns`` → ``dur``, ``busy_pct`` → ``busy %``."""
    k = key.replace("_ns_per_", "_per_")
    if k == "share" or k.endswith("_share"):
        k += "_pct"
    for suffix, repl in (("_ns", ""), ("_pct", " %"), ("_bytes", ""), ("_tflops", " TFLOP/s"), ("_tbps", " TB/s")):
        if k.endswith(suffix) and len(k) > len(suffix):
            k = k[: -len(suffix)] + repl
            break
    return k.replace("_", " ")


def times_apart(values_ns: list[int]) -> list[str]:
    """Durations in ns as :func:`ns` writes them, with as many more decimals (up to whole ns)
    as it takes for different values to read differently: start times a few µs apart in a
    2.3 s window all read "2.313 s" otherwise."""
    shown = [ns(v) for v in values_ns]
    if len(set(shown)) == len(set(values_ns)):
        return shown
    for digits in range(4, 10):
        shown = [_seconds(v, digits) for v in values_ns]
        if len(set(shown)) == len(set(values_ns)):
            break
    return shown


def _seconds(value_ns: int, digits: int) -> str:
    a = abs(value_ns)
    if a >= 1e9:
        return f"{value_ns / 1e9:.{digits}f} s"
    if a >= 1e6:
        return f"{value_ns / 1e6:.{max(digits - 3, 2)}f} ms"
    if a >= 1e3:
        return f"{value_ns / 1e3:.{max(digits - 6, 1)}f} µs"
    return f"{value_ns:.0f} ns"
