"""Names that only a training step produces: autograd's backward and the optimizer.

Read at load (a training loop's first iteration is a warm-up, never a prompt's prefill) and by
the findings' workload detection (advice for training, inference or serving).
"""

from __future__ import annotations

import polars as pl

# Host names only autograd's backward and optimizers produce.
TRAINING_OP = (
    r"^autograd::engine::evaluate_function|Backward\d*$|^aten::\w+_backward|"
    r"^Optimizer\.(step|zero_grad)#|^aten::_fused_(adam|adamw|sgd|adagrad)|"
    r"^## (backward|optimizer) ##$|CompiledFunctionBackward"
)
# Kernel names of backward passes and optimizers (for traces with no host ops).
TRAINING_KERNEL = r"(?i)backward|_bwd_|_bwd\b|bwd_kernel|wgrad|dgrad|fused_adam|multi_tensor_apply.*adam"

HOST_KINDS = ("cpu_op", "user_annotation", "python")


def training_evidence(events: pl.DataFrame) -> str | None:
    """The first name (most frequent) in ``events`` that shows a backward pass or an optimizer
    step, host ops first, then kernels; None for a trace of forward passes only."""
    names = events.group_by(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String)).len()
    for kinds, pattern in ((HOST_KINDS, TRAINING_OP), (("kernel",), TRAINING_KERNEL)):
        hit = names.filter(pl.col("kind").is_in(kinds) & pl.col("name").str.contains(pattern)).sort(
            ["len", "name"], descending=[True, False]
        )
        if hit.height:
            return str(hit["name"][0])
    return None
