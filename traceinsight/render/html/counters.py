"""Charts drawn from the trace itself: allocated memory and the NVML/GPM counters."""

from __future__ import annotations

import polars as pl

from traceinsight.render import svg
from traceinsight.render.html.page import Figure
from traceinsight.trace.model import Trace


def memory_figure(trace: Trace, window: tuple[int, int] | None = None) -> Figure | None:
    """Allocated memory over time; with ``window`` (start_ns, end_ns) on the timeline's axis."""
    mem = trace.memory
    if mem.height == 0:
        return None
    lo = window[0] if window else int(mem["ts_ns"].min())  # type: ignore[arg-type]
    x_range = ((0.0, (window[1] - window[0]) / 1e6)) if window else None
    series = []
    for (device_type, device), part in mem.sort("ts_ns").group_by("device_type", "device", maintain_order=True):
        if part.height < 2:
            continue
        step = max(part.height // 600, 1)  # keep the page light on long traces
        pts = [((t - lo) / 1e6, v / 2**20) for t, v in part.gather_every(step).select("ts_ns", "total_allocated_bytes").iter_rows() if v is not None]
        where = "CPU" if device_type == 0 else f"GPU {device}"
        series.append((f"{where} allocated (MiB)", pts))
    if not series:
        return None
    x_label = "ms since the trace window start (as the timeline)" if window else "ms"
    return Figure("Allocated memory", svg.lines(series, x_label=x_label, y_label="MiB", label="allocated memory", x_range=x_range))


def counter_figures(trace: Trace, window: tuple[int, int] | None = None) -> list[Figure]:
    """NVML/GPM counters over time; with ``window`` (start_ns, end_ns) on the timeline's axis,
    so that a dip in a counter lines up with the gap above it."""
    counters = trace.counters
    if counters.height == 0:
        return []
    lo = window[0] if window else int(counters["ts_ns"].min())  # type: ignore[arg-type]
    x_range = ((0.0, (window[1] - window[0]) / 1e6)) if window else None
    x_label = "ms since the trace window start (as the timeline)" if window else "ms since first sample"
    frame = counters.with_columns(pl.col("name").cast(pl.String), pl.col("series").cast(pl.String))
    figures = []
    pct_rows = frame.filter(pl.col("series").str.ends_with("_pct"))
    groups = (
        ("NVML utilisation", pl.col("name").str.starts_with("nvml"), "NVML: share of time any kernel ran (utilization.gpu) and the memory controller was busy."),
        ("GPM activity (Hopper and newer)", pl.col("name").str.starts_with("gpm"), "GPM: SM, tensor-core, DRAM and occupancy activity, each averaged since the previous sample."),
        ("Other utilisation counters", ~pl.col("name").str.starts_with("nvml") & ~pl.col("name").str.starts_with("gpm"), ""),
    )
    for title, selector, note in groups:
        rows = pct_rows.filter(selector)
        series = []
        silent = []
        for (name, ser, device), part in rows.sort("ts_ns").group_by("name", "series", "device", maintain_order=True):
            pts = [((t - lo) / 1e6, v) for t, v in part.select("ts_ns", "value").iter_rows() if v is not None]
            label = f"{name}.{ser}" + (f" (GPU {device})" if len(trace.gpu_devices) > 1 else "")
            # All-zero series (e.g. FP64 activity in a bf16 run) only clutter the chart.
            if any(v for _, v in pts):
                series.append((label, pts))
            else:
                silent.append(label)
        if not series:
            continue
        extra = f" Always 0, not drawn: {', '.join(silent)}." if silent else ""
        chart = svg.lines(series, x_label=x_label, y_label="%", y_max=100.0, label=title.lower(), x_range=x_range)
        figures.append(Figure(title, chart, (note + extra).strip()))
    for unit_suffix, title, unit in (("_w", "Power", "W"), ("_mhz", "Clocks", "MHz"), ("_c", "Temperature", "°C")):
        rows = frame.filter(pl.col("series").str.ends_with(unit_suffix))
        if rows.height == 0:
            continue
        series = [
            (f"{name}.{ser}", [((t - lo) / 1e6, v) for t, v in part.select("ts_ns", "value").iter_rows() if v is not None])
            for (name, ser), part in rows.sort("ts_ns").group_by("name", "series", maintain_order=True)
        ]
        figures.append(Figure(title, svg.lines(series, x_label=x_label, y_label=unit, label=title.lower(), x_range=x_range)))
    return figures
