"""Hooks through which results and reports display themselves, filled by the presentation layer.

The analysis layer never imports its renderers; ``traceinsight.render`` registers them here
when it is imported (``traceinsight.analyze`` does that for notebook users).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceinsight.errors import TraceInsightError

_RENDERERS: dict[str, Callable[[Any], str]] = {}


def register(kind: str, fn: Callable[[Any], str]) -> None:
    """Make ``fn`` the renderer of ``kind`` (``"result_html"``, ``"report_html"``, ...)."""
    _RENDERERS[kind] = fn


def render(kind: str, obj: Any) -> str:
    """``obj`` rendered by the function registered for ``kind``."""
    fn = _RENDERERS.get(kind)
    if fn is None:
        raise TraceInsightError(f"no renderer registered for {kind!r}; import traceinsight.render first")
    return fn(obj)
