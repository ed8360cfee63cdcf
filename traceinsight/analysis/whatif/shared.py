"""One dependency graph per trace, shared: building it is the expensive part of a replay.

The ``critical_path`` section and the findings' replayed savings read the same trace object in
one ``analyze``; :func:`recorded` builds its graph and the replay with recorded durations once
and hands both to every later caller while the trace lives.
"""

from __future__ import annotations

import weakref

import polars as pl

from traceinsight.analysis.whatif.graph import StepGraph, build
from traceinsight.analysis.whatif.replay import Timeline, replay, span, step_times, with_order
from traceinsight.analysis.whatif.threads import as_woken, with_wakes
from traceinsight.analysis.whatif.transforms import Transformation, apply_all
from traceinsight.trace.model import Trace

_BUILT: dict[int, tuple[StepGraph, Timeline]] = {}


def recorded(trace: Trace) -> tuple[StepGraph, Timeline]:
    """The trace's graph and its replay with the recorded durations (built on first use)."""
    key = id(trace)
    found = _BUILT.get(key)
    if found is None:
        graph = build(trace)
        first = replay(graph)
        woken = with_wakes(graph, first)
        timeline = first if woken is graph else as_woken(woken, first)
        # later replays (the findings' transformations) are solved in blocks of this order
        found = (with_order(woken, timeline), timeline)
        _BUILT[key] = found
        # dropped with the trace, before its id can be given to another object
        weakref.finalize(trace, _BUILT.pop, key, None)
    return found


def replayed_steps(graph: StepGraph, transforms: tuple[Transformation, ...]) -> tuple[pl.DataFrame, tuple[int, int]]:
    """Each step's device window (``step_times``) and the whole span (``span``) of ``graph``
    replayed with ``transforms``, replayed once per graph and tuple of transformations: the
    window's un-profiled step and the findings' prices replay some of the same tuples (the
    profiler's cost at the high end, a finding alone on a base), and a replay of a trace of a
    million events costs a good part of a second. Only these small results are kept."""
    key = ("replayed_steps", transforms)
    found = graph.memo.get(key)
    if found is None:
        tl = replay(graph, apply_all(graph, transforms))
        found = graph.memo[key] = (step_times(graph, tl), span(graph, tl))
    out: tuple[pl.DataFrame, tuple[int, int]] = found
    return out
