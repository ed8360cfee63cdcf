"""Findings whose saving is replayed from the dependency graph: agreement with the before/after
pairs' measured savings, the steady-state median, the total of all fixes together, the fallback
to the pool estimates, and the graph built once per trace."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest

from tests.analyses import analysed
from tests.conftest import SAMPLES_DIR, sample_path
from tests.findings_helpers import UNPROFILED, by_id, context, ids
from traceinsight.analysis.diff.compare import DiffOptions, diff_traces
from traceinsight.analysis.findings import DETECTORS, FindingsResult, find
from traceinsight.analysis.findings.price import replayed
from traceinsight.analysis.whatif import shared
from traceinsight.analysis.whatif.model import whatif
from traceinsight.analysis.whatif.transforms import ShrinkHost
from traceinsight.trace.model import Trace

# (before, after, the finding the change addresses): pairs whose finding carries its fix as
# transformations, so that its saving is replayed. "Measured" is diff's change of the mean
# kept step between the two traces; churn's is not significant (its steps vary by more), and
# the replay is held to it all the same.
PAIRS = [
    ("amp_off", "amp_on", "fp32_no_tensor_cores"),
    ("dataloader_w0", "dataloader_w4", "dataloader_stall"),
    ("fix_tf32_before", "fix_tf32_after", "fp32_no_tensor_cores"),
    ("fix_optimizer_before", "fix_optimizer_after", "unfused_optimizer"),
    ("fix_pinned_before", "fix_pinned_after", "pageable_memcpy"),
    ("fix_item_sync_before", "fix_item_sync_after", "host_sync"),
    ("fix_fp64_before", "fix_fp64_after", "fp64_compute"),
    ("fix_misaligned_before", "fix_misaligned_after", "gemm_misaligned"),
    ("fix_launch_before", "fix_launch_after", "launch_bound"),
    ("whatif/whatif_sync", "whatif/whatif_sync_dropped", "host_sync"),
    ("fix_churn_before", "fix_churn_after", "allocator_churn"),
]
# Known misses on the step without the profiler: held to fail, so that a fix shows.
MISSES: dict[str, str] = {}
WITHIN = 1.5  # predicted / measured, either way


def _exists(*names: str) -> bool:
    return all((SAMPLES_DIR / f"{n}.json.gz").exists() for n in names)


@functools.cache
def _findings(name: str, loader: Callable[[str], Trace], replay: bool = True, clock: bool = True) -> FindingsResult:
    return find(context(loader(name), replay=replay, clock=clock))


@functools.cache
def _measured_pct(before: str, after: str, loader: Callable[[str], Trace]) -> float:
    """diff's own figure: minus its change of the mean kept step device time."""
    change = diff_traces(loader(before), loader(after), DiffOptions(n_boot=50)).step_time.change_pct
    assert change is not None
    return -change


@pytest.mark.parametrize(
    ("before", "after", "finding"),
    [pytest.param(*p, id=p[0], marks=[pytest.mark.xfail(strict=True, reason=MISSES[p[0]])] if p[0] in MISSES else []) for p in PAIRS],
)
def test_replayed_saving_is_within_one_and_a_half_of_the_measured_one(sample_trace, before: str, after: str, finding: str) -> None:  # type: ignore[no-untyped-def]
    """The fix alone, priced on the step without the profiler, against the fix timed without
    the profiler (diff's traced figure where the pair was not timed so)."""
    if not _exists(before, after):
        pytest.skip("pair not recorded")
    result = _findings(before, sample_trace)
    assert result.replayed and result.clock == "estimated"
    f = by_id(result, finding)
    assert f is not None and f.alone_pct is not None
    assert f.method.startswith("replayed:") and f.claim_pct is not None
    pair = before.removeprefix("fix_").removesuffix("_before")
    measured = UNPROFILED.get(pair) or _measured_pct(before, after, sample_trace)
    assert measured / WITHIN <= f.alone_pct <= measured * WITHIN, (f.alone_pct, measured)


def test_the_narrower_fix_leads_and_the_wider_finding_counts_what_it_adds(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # host_bound's regions include the optimizer step, whose idle unfused_optimizer also
    # claims: host_bound is replayed on top of the fused optimizer, not alone.
    result = _findings("fix_optimizer_before", sample_trace, clock=False)
    assert ids(result)[0] == "unfused_optimizer"
    host = by_id(result, "host_bound")
    assert host is not None and "replayed after the fixes of unfused_optimizer" in (host.overlap or "")
    # what it adds to the fused optimizer, not what it would save alone
    ctx = context(sample_trace("fix_optimizer_before"), clock=False)
    est = {e.finding.id: e for e in (d(ctx) for d in DETECTORS) if e is not None}
    rep, _ = replayed.check(ctx)
    assert rep is not None

    def alone(*names: str) -> float:
        return 100.0 * (rep.before_ns - rep.after_ns(tuple(t for n in names for t in est[n].transforms))) / rep.before_ns

    # ranked below unfused_optimizer (and whatever else ranks above it): at most what it adds to
    # the fused optimizer, never what it would save alone
    adds = alone("unfused_optimizer", "host_bound") - alone("unfused_optimizer")
    assert host.saving_pct <= min(adds, alone("host_bound")) + 0.05
    assert host.saving_pct < alone("host_bound") - 10.0
    assert host.alone_pct == pytest.approx(alone("host_bound"), abs=0.05)


def test_listed_savings_add_up_to_every_fix_replayed_together(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # host_bound's and host_sync's fixes overlap (the host work runs while the GPU waits after
    # a sync): the list counts what each adds to those ranked above it (never more than it saves
    # alone), so that it adds up to no more than the replay of all of them together
    result = _findings("fix_item_sync_before", sample_trace, clock=False)
    assert len(result.findings) >= 2
    summed = sum(f.saving_pct for f in result.findings)
    alone = sum(f.alone_pct or 0.0 for f in result.findings)
    assert summed <= result.total_saving_pct + 0.01
    assert summed <= alone + 0.01  # none lists more than it saves alone
    ctx = context(sample_trace("fix_item_sync_before"), clock=False)
    est = {e.finding.id: e for e in (d(ctx) for d in DETECTORS) if e is not None}
    rep, _ = replayed.check(ctx)
    assert rep is not None
    every = tuple(t for f in result.findings if f.method.startswith("replayed") for t in est[f.id].transforms)
    together = 100.0 * (rep.before_ns - rep.after_ns(every)) / rep.before_ns
    assert result.total_saving_pct >= together - 0.5


def test_savings_are_of_the_steady_steps_not_the_mean(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # whatif_sync_dropped's first step drains a queue built before the trace (22 ms against
    # 9.9): the mean step carries it; the findings' savings are of the median steady step.
    name = "whatif/whatif_sync_dropped"
    r = whatif(sample_trace(name), ())
    assert r.before_ns > 1.1 * r.steady_before_ns
    found = [f for f in _findings(name, sample_trace).findings if f.method.startswith("replayed:")]
    assert found
    for f in found:
        assert f"{r.steady_before_ns / 1e6:.3f} →" in f.method
        assert f"{r.before_ns / 1e6:.3f} →" not in f.method


def test_a_trace_the_replay_does_not_explain_keeps_its_pool_estimates_one_step_lower(sample_trace, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("fix_pinned_before")
    claims = find(context(trace, replay=False))
    monkeypatch.setattr(replayed, "TOLERANCE", -1.0)  # no replay is close enough
    fell = find(context(trace))
    assert not fell.replayed
    lower = {"high": "medium", "medium": "low", "low": "low"}
    for f in (*claims.findings, *claims.not_material):
        g = by_id(fell, f.id)
        assert g.saving_pct == f.saving_pct and not g.method.startswith("replayed")
        # the findings that would have been replayed say why they were not, one step lower
        if f.id == "pageable_memcpy" or "does not explain" in g.confidence_reason:
            assert g.confidence == lower[f.confidence]
            assert "the replay does not explain this trace" in g.confidence_reason
        else:
            assert g.confidence == f.confidence
    assert fell.total_saving_pct == claims.total_saving_pct
    assert any("savings are the pool estimates" in s for s in fell.skipped)


def test_an_idle_thread_follows_the_thread_that_woke_it(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # dataloader_w0: the main thread loads data for ~230 ms per step; the autograd thread
    # waits, then runs the backward pass. Without the wake edge from the main thread, its idle
    # time would stay fixed and no change on the main thread would shorten the step.
    trace = sample_trace("dataloader_w0")
    r = whatif(trace, (ShrinkHost(r"^enumerate\(DataLoader\)", 0.0),))
    assert r.explained
    assert r.steps["saving_ns"].median() > 0.9 * r.steps["before_ns"].median()  # type: ignore[operator]


def test_the_graph_is_built_once_per_trace(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import traceinsight as ti

    path = SAMPLES_DIR / "fix_pinned_before.json.gz"
    trace = ti.load(path, cache=False)
    calls: list[int] = []
    real = shared.build

    def counted(t: Trace):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(t)

    monkeypatch.setattr(shared, "build", counted)
    report = ti.analyze(trace, only=["critical_path", "findings"])
    assert report.sections["findings"].replayed  # type: ignore[union-attr]
    assert len(calls) == 1


def test_a_trace_whose_device_work_no_launch_links_is_not_replayed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Hand-made: four steps whose kernels carry correlation ids no launch call has (a trace
    # written without them): the graph pins the kernels at their recorded starts and every
    # replay gives back the recording, which must not be read as "this fix saves nothing".
    from tests.handmade import kernel, launch, op, write_trace
    from traceinsight.trace.loader import load

    events = []
    for i in range(4):
        t = 1_000.0 + i * 1_000.0
        events.append(op(f"ProfilerStep#{i}", t, 900, cat="user_annotation"))
        for j in range(20):
            events.append(op("aten::add", t + 10 + j * 40, 30))
            events.append(launch("cudaLaunchKernel", t + 20 + j * 40, 10, 10_000 + i * 100 + j))
            events.append(kernel("ampere_sgemm_128x64_nn", t + 35 + j * 40, 5, i * 100 + j))
    trace = load(write_trace(tmp_path / "unlinked.json", events, baseTimeNanoseconds=0), cache=False)
    r = find(context(trace, replay=True))
    assert not r.replayed
    assert any("no launch links to the host" in s for s in r.skipped), r.skipped



def test_replayed_saving_of_loop_iterations_is_per_iteration() -> None:
    # decode_eager has no ProfilerStep: 80 iterations of one forward stand in for steps, while
    # the replay windows the whole trace. Its per-step saving is a share of one iteration.
    report = analysed(sample_path("decode/decode_eager"))
    result = report.findings
    assert result.steps == 80 and result.replayed
    step_ns = result.step_ns
    assert step_ns is not None
    for f in result.findings:
        assert f.per_step and f.method.startswith("replayed")
        assert f.saving_ns == pytest.approx(f.saving_pct / 100 * step_ns, rel=1e-3)
        assert f.saving_window_ns == pytest.approx(80 * f.saving_ns, rel=0.02)
    launch = by_id(result, "launch_bound")
    assert f"{launch.saving_ns / 1e6:.1f} ms per step" in report.headline.verdict


def test_a_wider_finding_is_never_credited_more_than_its_own_fix_saves(sample_trace) -> None:  # type: ignore[no-untyped-def]
    # fix_item_sync_before: with the syncs removed the profiled loop turns host-bound, so
    # collapsing launches on top of that fix would save 37 %; collapsing them alone saves 8 %.
    # The finding reads what its own fix saves; the rest needs both (the total counts it).
    result = _findings("fix_item_sync_before", sample_trace, clock=False)
    launch = by_id(result, "launch_bound")
    assert launch is not None and "replayed after the fixes of host_sync, host_bound" in (launch.overlap or "")
    ctx = context(sample_trace("fix_item_sync_before"), clock=False)
    est = {e.finding.id: e for e in (d(ctx) for d in DETECTORS) if e is not None}
    rep, _ = replayed.check(ctx)
    assert rep is not None
    alone = 100.0 * (rep.before_ns - rep.after_ns(est["launch_bound"].transforms)) / rep.before_ns
    assert launch.alone_pct == pytest.approx(alone, abs=0.05) and alone < 15.0
    assert launch.saving_pct <= alone + 0.05
    # the sync first: host_bound prices the host work once the syncs are gone
    assert [f.id for f in result.findings][:2] == ["host_sync", "host_bound"]
