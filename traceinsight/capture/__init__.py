"""Record PyTorch profiler traces with NVML/GPM counters beside the GPU's kernels.

Needs torch (imported lazily) and, for counters, nvidia-ml-py; never polars.
"""

from __future__ import annotations

from traceinsight.capture.monitor import GpuMonitor, GpuSummary, gpu_profile, summarize
from traceinsight.capture.nvml import NvmlSampler, Sample
from traceinsight.capture.profiler import Profile, Schedule, current_profiler, profile

__all__ = [
    "GpuMonitor",
    "GpuSummary",
    "NvmlSampler",
    "Profile",
    "Sample",
    "Schedule",
    "current_profiler",
    "gpu_profile",
    "profile",
    "summarize",
]
