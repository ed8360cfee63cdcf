"""Names of the counter families and series that capture writes and analyses read.

This module is the contract between capture and the loader: it is pure Python so that
either side can import it without torch or polars.
"""

from __future__ import annotations

from typing import Final

# Top-level key capture adds to the trace JSON.
TRACE_META_KEY: Final = "traceinsight"

# Chrome counter event families (event "name").
NVML_UTILIZATION: Final = "nvml.utilization"
NVML_MEMORY: Final = "nvml.memory"
NVML_POWER: Final = "nvml.power"
NVML_CLOCKS: Final = "nvml.clocks"
NVML_THERMAL: Final = "nvml.thermal"
NVML_THROTTLE: Final = "nvml.throttle"
GPM: Final = "gpm"

# Series (keys of a counter event's "args"), each with its unit in the name.
GPU_PCT: Final = "gpu_pct"
MEMORY_PCT: Final = "memory_pct"
USED_BYTES: Final = "used_bytes"
TOTAL_BYTES: Final = "total_bytes"
POWER_W: Final = "power_w"
ENERGY_MJ: Final = "energy_mj"
SM_MHZ: Final = "sm_mhz"
MEM_MHZ: Final = "mem_mhz"
TEMP_C: Final = "temp_c"
REASONS_MASK: Final = "reasons_mask"
SW_POWER_CAP: Final = "sw_power_cap"
HW_SLOWDOWN: Final = "hw_slowdown"
SW_THERMAL: Final = "sw_thermal"
HW_THERMAL: Final = "hw_thermal"
HW_POWER_BRAKE: Final = "hw_power_brake"
SM_UTIL_PCT: Final = "sm_util_pct"
SM_OCCUPANCY_PCT: Final = "sm_occupancy_pct"
TENSOR_UTIL_PCT: Final = "tensor_util_pct"
DRAM_BW_UTIL_PCT: Final = "dram_bw_util_pct"
FP16_UTIL_PCT: Final = "fp16_util_pct"
FP32_UTIL_PCT: Final = "fp32_util_pct"
FP64_UTIL_PCT: Final = "fp64_util_pct"
PCIE_RX_BYTES_PER_S: Final = "pcie_rx_bytes_per_s"
PCIE_TX_BYTES_PER_S: Final = "pcie_tx_bytes_per_s"

# Throttle flag series and the NVML clock-event reason bit each one stands for.
THROTTLE_FLAGS: Final[dict[str, int]] = {
    SW_POWER_CAP: 0x04,
    HW_SLOWDOWN: 0x08,
    SW_THERMAL: 0x20,
    HW_THERMAL: 0x40,
    HW_POWER_BRAKE: 0x80,
}

# Every family and the series it may carry; a series whose value is unavailable is omitted.
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    NVML_UTILIZATION: (GPU_PCT, MEMORY_PCT),
    NVML_MEMORY: (USED_BYTES, TOTAL_BYTES),
    NVML_POWER: (POWER_W, ENERGY_MJ),
    NVML_CLOCKS: (SM_MHZ, MEM_MHZ),
    NVML_THERMAL: (TEMP_C,),
    NVML_THROTTLE: (REASONS_MASK, *THROTTLE_FLAGS),
    GPM: (
        SM_UTIL_PCT,
        SM_OCCUPANCY_PCT,
        TENSOR_UTIL_PCT,
        DRAM_BW_UTIL_PCT,
        FP16_UTIL_PCT,
        FP32_UTIL_PCT,
        FP64_UTIL_PCT,
        PCIE_RX_BYTES_PER_S,
        PCIE_TX_BYTES_PER_S,
    ),
}

# NVML GPM metric ids (nvmlGpmMetricId_t) for each GPM series, and the factor that brings the
# metric to the series' unit (PCIe metrics come in MiB/s).
GPM_METRIC_IDS: Final[dict[str, tuple[int, float]]] = {
    SM_UTIL_PCT: (2, 1.0),
    SM_OCCUPANCY_PCT: (3, 1.0),
    TENSOR_UTIL_PCT: (5, 1.0),
    DRAM_BW_UTIL_PCT: (10, 1.0),
    FP64_UTIL_PCT: (11, 1.0),
    FP32_UTIL_PCT: (12, 1.0),
    FP16_UTIL_PCT: (13, 1.0),
    PCIE_TX_BYTES_PER_S: (20, 1024.0 * 1024.0),
    PCIE_RX_BYTES_PER_S: (21, 1024.0 * 1024.0),
}

# GPM metrics are averages between two samples; closer than this they read 0 or NaN.
GPM_MIN_WINDOW_S: Final = 0.1
