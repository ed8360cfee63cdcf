"""What this GPU can do: one model every analysis asks (see ``docs/device-model.md``)."""

from traceinsight.analysis.device.model import (
    VENDORS,
    DeviceModel,
    Features,
    attention_advice,
    build,
    from_meta,
    from_trace,
    fused_optimizer_advice,
    graphs_advice,
    matmul_precision_advice,
)

__all__ = [
    "VENDORS",
    "DeviceModel",
    "Features",
    "attention_advice",
    "build",
    "from_meta",
    "from_trace",
    "fused_optimizer_advice",
    "graphs_advice",
    "matmul_precision_advice",
]
