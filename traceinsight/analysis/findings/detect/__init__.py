"""The detectors: one per catalogue entry, each reading the :class:`FindingContext` and stating
what its fix would save as an :class:`Estimate` (or None where its evidence is not in the trace).

``DETECTORS`` is the list the findings analysis runs, in this order.
"""

from __future__ import annotations

from collections.abc import Callable

from traceinsight.analysis.findings.detect.attention import detect_eager_attention
from traceinsight.analysis.findings.detect.batching import detect_sequential_small_gemms
from traceinsight.analysis.findings.detect.comm import (
    detect_allreduce_per_parameter,
    detect_exposed_all_to_all,
    detect_exposed_communication,
)
from traceinsight.analysis.findings.detect.compiled import (
    detect_compile_in_window,
    detect_compile_not_applied,
    detect_graph_break,
    detect_recompile,
)
from traceinsight.analysis.findings.detect.conv import (
    detect_channels_last,
    detect_input_channels_padding,
)
from traceinsight.analysis.findings.detect.fusion import detect_unfused_elementwise
from traceinsight.analysis.findings.detect.gradzero import detect_zero_grad_memset
from traceinsight.analysis.findings.detect.host_comm import detect_cpu_collectives
from traceinsight.analysis.findings.detect.idle import (
    detect_allocator_churn,
    detect_dataloader_stall,
    detect_host_bound,
    detect_host_sync,
)
from traceinsight.analysis.findings.detect.launches import detect_launch_bound
from traceinsight.analysis.findings.detect.memory_growth import detect_memory_growth
from traceinsight.analysis.findings.detect.precision import (
    detect_fp32_no_tensor_cores,
    detect_fp64_compute,
    detect_gemm_misaligned,
)
from traceinsight.analysis.findings.detect.preprocessing import detect_host_preprocessing
from traceinsight.analysis.findings.detect.repeats import detect_repeated_launches
from traceinsight.analysis.findings.detect.training import (
    detect_memory_pressure,
    detect_unfused_optimizer,
)
from traceinsight.analysis.findings.detect.transfers import (
    detect_cpu_tensor_creation,
    detect_noncontiguous_copy,
    detect_pageable_memcpy,
)
from traceinsight.analysis.findings.price.savings import Estimate
from traceinsight.analysis.findings.read.context import FindingContext

Detector = Callable[[FindingContext], Estimate | None]

DETECTORS: tuple[Detector, ...] = (
    detect_dataloader_stall,
    detect_pageable_memcpy,
    detect_cpu_tensor_creation,
    detect_host_sync,
    detect_fp64_compute,
    detect_fp32_no_tensor_cores,
    detect_gemm_misaligned,
    detect_launch_bound,
    detect_host_bound,
    detect_sequential_small_gemms,
    detect_unfused_optimizer,
    detect_noncontiguous_copy,
    detect_graph_break,
    detect_recompile,
    detect_compile_in_window,
    detect_exposed_communication,
    detect_allocator_churn,
    detect_memory_pressure,
    detect_eager_attention,
    detect_unfused_elementwise,
    detect_zero_grad_memset,
    detect_channels_last,
    detect_input_channels_padding,
    # communication by what it is
    detect_exposed_all_to_all,
    detect_allreduce_per_parameter,
    detect_cpu_collectives,
    detect_host_preprocessing,
    detect_memory_growth,
    # causes in the host code that launch_bound's idle is the residual of
    detect_repeated_launches,
    detect_compile_not_applied,
)
