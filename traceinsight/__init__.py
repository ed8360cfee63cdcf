"""traceinsight: turn PyTorch profiler traces into answers.

Analysis needs only polars; ``traceinsight.capture`` needs torch (the ``capture`` extra).
Heavy imports are lazy so that ``import traceinsight.capture`` works where polars is absent
(for example on a GPU box that only records traces).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# polars' bundled allocator (jemalloc) keeps freed pages for a while before returning them,
# first as "dirty" pages and then as "muzzy" ones, which are MADV_FREE'd and still count as
# resident until the kernel needs them. Loading a big trace frees and reallocates hundreds of
# MB in steps, so a short dirty decay and no muzzy stage lower the peak resident memory. On
# the 453 MB benchmark trace (five interleaved runs each), peak RSS was 545–608 MB with
# 10/0 ms against 835–850 MB with the earlier 200/200 ms, at the same speed; 0/0 gives
# ~470 MB but faults pages in again and again (+40 % page faults, about +0.25 s). It is read
# once, when polars loads; a value the user set wins.
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:10,muzzy_decay_ms:0")

if TYPE_CHECKING:
    from traceinsight.trace.model import Trace, TraceMeta

__all__ = ["Trace", "TraceMeta", "__version__", "analyze", "diff", "load"]


def load(path: Any, *, cache: bool = True) -> Trace:
    """Load a Kineto trace (``.json`` / ``.json.gz``) into a :class:`Trace`."""
    from traceinsight.trace.loader import load as _load

    return _load(path, cache=cache)


def analyze(trace: Any, config: Any = None, **options: Any) -> Any:
    """Run every registered analysis over a trace (a :class:`Trace` or a path); see ``Report``."""
    import traceinsight.report.notebook  # noqa: F401  (registers the notebook/HTML/Markdown views)
    from traceinsight.analysis.report import analyze as _analyze

    loaded = trace if hasattr(trace, "events") else load(trace)
    return _analyze(loaded, config, **options)


def diff(before: Any, after: Any, **options: Any) -> Any:
    """Compare two runs (traces or paths): step times with a noise-aware verdict, and why."""
    from traceinsight.api_diff import diff as _diff

    return _diff(before, after, **options)


def __getattr__(name: str) -> Any:
    if name in ("Trace", "TraceMeta"):
        from traceinsight.trace import model

        return getattr(model, name)
    raise AttributeError(f"module 'traceinsight' has no attribute {name!r}")
