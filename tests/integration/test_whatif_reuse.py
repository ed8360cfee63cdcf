"""What the replays keep between calls gives what computing it afresh gives.

The profiler cost's windows, the first transformation's durations, each tuple's replayed steps
and the nodes of each step are kept per graph; a key that misses a parameter, or a kept array
written to, would hand one replay another's answer. Each answer here is compared with the same
one on a fresh copy of the graph (nothing kept) or with the definition written out.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceinsight as ti
from traceinsight.analysis.whatif.graph import SEG_SYNC, StepGraph
from traceinsight.analysis.whatif.replay import Durations, replay, step_times
from traceinsight.analysis.whatif.shared import recorded, replayed_steps
from traceinsight.analysis.whatif.transforms import RemoveProfilerCost, ShrinkHost, apply_all
from traceinsight.analysis.window.realstep import costs_ns, memory_at

ROOT = Path(__file__).resolve().parents[2]
# training steps recorded with profile_memory (allocator events) and with_stack (Python frames)
TRACES = [ROOT / "sample_traces" / "train_eager.json.gz", ROOT / "sample_traces" / "train_with_stack.json.gz"]


def _fresh(graph: StepGraph) -> StepGraph:
    return replace(graph)  # same arrays, a memo of its own


def _cost(per_event_ns: dict[str, float], memory: tuple[tuple[int, int, int], ...], window_ns: int = 1_000_000) -> RemoveProfilerCost:
    return RemoveProfilerCost(tuple(sorted(per_event_ns.items())), memory, window_ns)


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name.split(".")[0])
def loaded(request: pytest.FixtureRequest) -> tuple[ti.Trace, StepGraph]:
    trace = ti.load(request.param, cache=False)
    return trace, recorded(trace)[0]


def _same(a: Durations, b: Durations) -> None:
    for name in ("seg_dur_ns", "seg_gap_ns", "gpu_dur_ns", "sync_on", "wait_on"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_profiler_cost_at_each_cost_as_on_a_fresh_graph(loaded: tuple[ti.Trace, StepGraph]) -> None:
    trace, graph = loaded
    lo, hi = costs_ns()
    memory = memory_at(trace)
    # one graph asked in turn (windows kept), each against a graph that keeps nothing
    for costs, mem, window in ((lo, memory, 1_000_000), (hi, memory, 1_000_000), (hi, (), 1_000_000),
                               (lo, memory, 250_000), ({**lo, "memory": 0.0}, memory, 1_000_000)):
        change = _cost(costs, mem, window)
        _same(apply_all(graph, (change,)), apply_all(_fresh(graph), (change,)))


def test_profiler_cost_takes_out_what_one_window_holds(loaded: tuple[ti.Trace, StepGraph]) -> None:
    """With one window per thread, each thread loses min(its events × cost, its host time)."""
    _, graph = loaded
    change = _cost({"op": 1000.0, "runtime": 2000.0, "python": 500.0, "memory": 0.0}, (), window_ns=10**15)
    after = apply_all(graph, (change,))
    host = graph.host_events
    cost_ns = host.select("pid", "tid", pl.col("kind").replace_strict(
        {"runtime": 2000.0, "driver": 2000.0, "python": 500.0}, default=1000.0, return_dtype=pl.Float64).alias("cost"))
    wanted = cost_ns.group_by("pid", "tid").agg(pl.col("cost").sum())
    rows = pl.DataFrame({"id": graph.seg_owner}).join(host.select("id", "pid", "tid"), on="id", how="left", maintain_order="left")
    waits = graph.seg_class == SEG_SYNC
    before = np.where(waits, graph.seg_gap_ns, graph.seg_dur_ns + graph.seg_gap_ns)
    now = np.where(waits, after.seg_gap_ns, after.seg_dur_ns + after.seg_gap_ns)
    lost = rows.with_columns(work=pl.Series(before), cut=pl.Series(before - now)).group_by("pid", "tid").agg(
        pl.col("work").sum(), pl.col("cut").sum())
    checked = lost.join(wanted, on=["pid", "tid"], how="inner")
    assert checked.height > 0
    for work, cut, cost in checked.select("work", "cut", "cost").iter_rows():
        # every piece is rounded to the ns on its own
        assert abs(cut - min(cost, work)) <= (graph.seg_node.size + 1), (work, cut, cost)


def test_kept_first_durations_serve_only_their_own_transformation(loaded: tuple[ti.Trace, StepGraph]) -> None:
    trace, graph = loaded
    lo, hi = costs_ns()
    a, b = _cost(lo, memory_at(trace)), _cost(hi, memory_at(trace))
    more = ShrinkHost(None, 0.5)
    for chosen in ((a, more), (b, more), (a,), (more, a), (b, more)):
        _same(apply_all(graph, chosen), apply_all(_fresh(graph), chosen))
    kept = apply_all(graph, (b,))
    with pytest.raises(ValueError):
        kept.seg_dur_ns[0] = 0  # shared between replays: read-only


def test_replayed_steps_as_a_replay_of_their_own(loaded: tuple[ti.Trace, StepGraph]) -> None:
    trace, graph = loaded
    lo, hi = costs_ns()
    for chosen in ((_cost(hi, memory_at(trace)),), (ShrinkHost(None, 0.5),), (_cost(lo, memory_at(trace)), ShrinkHost(None, 0.5))):
        times, _ = replayed_steps(graph, chosen)
        fresh = _fresh(graph)
        assert times.equals(step_times(fresh, replay(fresh, apply_all(fresh, chosen))))


def _step_times_by_frames(graph: StepGraph, tl: object) -> pl.DataFrame:
    """The steps' device windows as ``sections/steps.py`` defines them, written with frames."""
    work = (
        pl.DataFrame({"step": graph.gpu_step, "end": tl.gpu_end_ns})  # type: ignore[attr-defined]
        .filter(pl.col("step") >= 0).group_by("step").agg(pl.col("end").max().alias("work_end"))
    )
    start_node = graph.steps["start_node"].fill_null(-1).to_numpy()
    end_node = graph.steps["end_node"].fill_null(-1).to_numpy()
    neg = np.int64(-(2**62))
    steps = graph.steps.select("step").with_columns(
        host_start=pl.Series(np.where(start_node >= 0, tl.host_start_ns[start_node], neg)),  # type: ignore[attr-defined]
        host_end=pl.Series(np.where(end_node >= 0, tl.host_end_ns[end_node], neg)),  # type: ignore[attr-defined]
    ).join(work, on="step", how="left")
    earlier = pl.coalesce("work_end", "host_end").cum_max().shift(1)
    return (
        steps.with_columns(device_start_ns=pl.max_horizontal("host_start", earlier))
        .with_columns(device_end_ns=pl.max_horizontal("device_start_ns", pl.coalesce("work_end", "host_end")))
        .with_columns(device_dur_ns=pl.col("device_end_ns") - pl.col("device_start_ns"))
        .select("step", "device_start_ns", "device_end_ns", "device_dur_ns")
    )


def test_step_times_as_the_frame_definition(loaded: tuple[ti.Trace, StepGraph]) -> None:
    _, graph = loaded
    assert graph.steps.height > 1
    for tl in (replay(graph), replay(graph, apply_all(graph, (ShrinkHost(None, 0.3),)))):
        got = step_times(graph, tl)
        assert got.equals(_step_times_by_frames(graph, tl)), (got, _step_times_by_frames(graph, tl))
