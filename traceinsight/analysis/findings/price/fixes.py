"""Small builders of the what-if transformations the detectors attach to their estimates."""

from __future__ import annotations

import re
from collections.abc import Iterable

from traceinsight.analysis.whatif.transforms import ScaleKernels, ShrinkHost


def exact_names(names: Iterable[str]) -> str:
    """A regular expression matching exactly these names (and nothing else)."""
    unique = sorted({n for n in names if n})
    return "^(?:" + "|".join(re.escape(n) for n in unique) + ")$" if unique else "(?!)"


def scale_names(names: Iterable[str], new_ns: float, old_ns: float) -> tuple[ScaleKernels, ...]:
    """Device work of these kernel names taking ``new_ns`` where it took ``old_ns`` in all."""
    listed = [n for n in names if n]
    if not listed or old_ns <= 0:
        return ()
    return (ScaleKernels("name~" + exact_names(listed), max(new_ns, 0.0) / old_ns),)


def no_host_time_in(regions: Iterable[str]) -> tuple[ShrinkHost, ...]:
    """Host time inside spans of these names gone (the work moved off the step's path)."""
    listed = [r for r in regions if r]
    return (ShrinkHost(exact_names(listed), 0.0),) if listed else ()
