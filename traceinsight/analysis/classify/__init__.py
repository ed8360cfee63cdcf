"""What each kernel is: family, precision, tensor-core use and library, from its name.

One classifier for every analysis (see ``docs/device-model.md``)::

    from traceinsight.analysis.classify import classify, classify_names

    classify("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN")
    # KernelClass(family='gemm', precision='bf16', tensor_core=True, library='nvjet', ...)
"""

from traceinsight.analysis.classify.kernels import (
    COLUMNS,
    KernelClass,
    classify,
    classify_names,
    collective_of,
    with_classes,
)
from traceinsight.analysis.classify.rules import (
    COLLECTIVES,
    FAMILIES,
    MATRIX_FAMILIES,
    PRECISIONS,
    RULES,
    Rule,
)

__all__ = [
    "COLLECTIVES",
    "COLUMNS",
    "FAMILIES",
    "MATRIX_FAMILIES",
    "PRECISIONS",
    "RULES",
    "KernelClass",
    "Rule",
    "classify",
    "classify_names",
    "collective_of",
    "with_classes",
]
