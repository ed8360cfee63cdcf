"""The step graph, its replay, transformations, the critical path and ``traceinsight whatif``.

The scenario traces are hand-made (written here, not recorded): each step runs host work h,
launches one GEMM g, and (serialized) synchronises on it, so the answers are known.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import traceinsight as ti
from tests.handmade import kernel, launch, op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.lib.timeline import device_step_spans
from traceinsight.analysis.whatif import section, syntax
from traceinsight.analysis.whatif.graph import build
from traceinsight.analysis.whatif.model import validation, whatif
from traceinsight.analysis.whatif.replay import replay
from traceinsight.analysis.whatif.transforms import (
    CollapseLaunches,
    Remove,
    ScaleKernels,
    ShrinkHost,
    TransformError,
    apply_all,
)
from traceinsight.cli.app import app, main

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_traces").glob("*.json.gz"))
HTA = Path(__file__).resolve().parents[3].joinpath("shared/third_party/hta/critical_path")
H, G, LAUNCH, LAT, SYNC_POST = 100.0, 60.0, 5.0, 3.0, 2.0


def scenario(tmp_path: Path, *, sync: bool, steps: int = 6, sync_call: str = "cudaDeviceSynchronize") -> ti.Trace:
    """Per step: host work H, launch of a GEMM (G µs, starting LAT after its launch), and with
    ``sync`` a ``sync_call`` that returns SYNC_POST after the GEMM ends."""
    events = []
    t, gpu_free = 1000.0, 0.0
    for i in range(steps):
        start = t
        events.append(op("aten::work", t, H))
        t += H
        events.append(launch("cudaLaunchKernel", t, LAUNCH, correlation=i + 1))
        k_start = max(t + LAT, gpu_free)
        events.append(kernel("ampere_sgemm_128x64_nn", k_start, G, correlation=i + 1))
        gpu_free = k_start + G
        t += LAUNCH
        if sync:
            end = max(t, gpu_free) + SYNC_POST
            events.append(launch(sync_call, t, end - t, correlation=1000 + i))
            t = end
        events.append(op(f"ProfilerStep#{i}", start, t - start, cat="user_annotation"))
    suffix = "" if sync_call == "cudaDeviceSynchronize" else f"_{sync_call}"
    path = write_trace(tmp_path / f"scenario_{sync}{suffix}.json", events, baseTimeNanoseconds=0)
    return ti.load(path, cache=False)


def _us(result: ti.WhatIfResult, step: int | None = 3) -> tuple[float, float]:
    """Before and after in µs: of one steady step, or the mean over steps (step=None)."""
    if step is None:
        return result.before_ns / 1000, result.after_ns / 1000
    row = result.steps.filter(pl.col("step") == step).row(0, named=True)
    return row["before_ns"] / 1000, row["after_ns"] / 1000


def test_serialized_steps(tmp_path: Path) -> None:
    trace = scenario(tmp_path, sync=True)
    # step = host start to the sync's return: H + launch latency + G + SYNC_POST (the host
    # code ends after the GEMM: the step ends with it)
    before = H + LAT + G + SYNC_POST
    assert _us(whatif(trace, [ShrinkHost(None, 0.5)])) == (before, before - H / 2)
    assert _us(whatif(trace, [ScaleKernels("gemm", 0.5)])) == (before, before - G / 2)
    # without the sync the host runs ahead: steps are as long as the host's period
    removed = whatif(trace, [Remove("cudaDeviceSynchronize")])
    assert _us(removed) == (before, H + LAUNCH)
    # the mean: the first step still holds its whole GEMM (no sync to return from now), the
    # five others the host's period
    assert _us(removed, None) == (before, pytest.approx((H + LAT + G + 5 * (H + LAUNCH)) / 6, abs=1e-3))


def test_cuda_free_waits_for_the_device_like_a_sync(tmp_path: Path) -> None:
    # cudaFree synchronises the device: its time until the GEMM ends is a wait, which host
    # work made shorter does not shorten, and removing the call lets the host run ahead
    trace = scenario(tmp_path, sync=True, sync_call="cudaFree")
    before = H + LAT + G + SYNC_POST
    halved = whatif(trace, [ShrinkHost(None, 0.5)])
    assert _us(halved) == (before, before - H / 2)
    assert _us(halved, None) == (before, before - H / 2)
    assert _us(whatif(trace, [Remove("cudaFree")])) == (before, H + LAUNCH)


def test_overlapped_steps(tmp_path: Path) -> None:
    trace = scenario(tmp_path, sync=False)
    period = H + LAUNCH
    assert _us(whatif(trace, [ScaleKernels("gemm", 0.5)])) == (period, period)  # host-bound
    # now the GPU sets it: G plus the back-to-back gap (1 µs when the trace shows none)
    assert _us(whatif(trace, [ShrinkHost(None, 0.5)])) == (period, G + 1.0)
    cp = whatif(trace, [ShrinkHost(None, 0.5)]).critical_after
    assert cp.filter(pl.col("step") == 3)["gpu_ns"].item() == cp.filter(pl.col("step") == 3)["length_ns"].item()


def test_transformations_compose(tmp_path: Path) -> None:
    trace = scenario(tmp_path, sync=True)
    both = whatif(trace, [ShrinkHost(None, 0.5), ScaleKernels("name~sgemm", 0.5)])
    assert _us(both)[1] == H / 2 + LAT + G / 2 + SYNC_POST
    assert len(both.transformations) == 2
    # order does not matter for independent changes
    again = whatif(trace, [ScaleKernels("gemm", 0.5), ShrinkHost(None, 0.5)])
    assert again.after_ns == both.after_ns
    # the kernel starts LAT after its launch call starts: a free launch call does not move it
    graphs = whatif(trace, [CollapseLaunches()])
    assert graphs.after_ns == graphs.before_ns


def test_critical_path_tiles_the_step(tmp_path: Path) -> None:
    result = section.run(scenario(tmp_path, sync=True), AnalysisConfig())
    assert result.explained
    kinds = [c for c in result.steps.columns if c.endswith("_ns") and c not in ("recorded_ns", "replayed_ns", "length_ns")]
    total = result.steps.select(pl.sum_horizontal(kinds)).to_series()
    assert (total == result.steps["length_ns"]).all()
    row = result.steps.filter(pl.col("step") == 3).row(0, named=True)
    assert row["host_ns"] == H * 1000 and row["gpu_ns"] == G * 1000
    assert row["launch_ns"] == LAT * 1000


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_replay_reproduces_recorded_steps(path: Path) -> None:
    trace = ti.load(path)
    graph = build(trace)
    check = validation(graph, replay(graph), device_step_spans(trace))
    if check.height == 0:
        pytest.skip("no steps")
    assert check["replayed_ns"].null_count() == 0
    assert check["error_pct"].max() <= 5.0, check  # type: ignore[operator]


def test_hta_simple_add_critical_path() -> None:
    """HTA marks critical events with args.critical; our path over the whole trace holds the
    same device work that HTA's does (see docs/whatif.md for how the two differ)."""
    if not HTA.exists():
        pytest.skip("../shared is absent")
    expected = json.loads(gzip.decompress((HTA / "simple_add_expected_overlaid.json.gz").read_bytes()))
    hta_gpu = {
        (e["name"], round(e["ts"] * 1000))
        for e in expected["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and (e.get("args") or {}).get("critical")
    }
    trace = ti.load(HTA / "simple_add_input.json.gz")
    graph = build(trace)
    result = section.run(trace, AnalysisConfig())
    assert result.steps.height == 1  # no ProfilerStep: the whole trace
    shares = result.shares
    # HTA's path is host-bound (352 ops, 250 runtime calls, 22 device events): so is ours
    assert shares["host"] + shares["launch"] + shares["sync"] > 90
    from traceinsight.analysis.whatif.model import critical_paths

    _, path = critical_paths(graph, replay(graph))
    # the file has no baseTimeNanoseconds, so times are compared as offsets from the first
    # device event on each side
    ours = sorted(path.filter(pl.col("node") == "gpu", pl.col("kind").is_in(["gpu", "copy"]))["index"].unique().to_list())
    t0_ours = int(graph.gpu_ts_ns.min())
    t0_hta = min(round(e["ts"] * 1000) for e in expected["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    names = graph.gpu_work["name"].cast(pl.String).to_list()
    ours_gpu = {(names[i], (int(graph.gpu_ts_ns[i]) - t0_ours) // 1000) for i in ours}
    hta_rel = {(n, (ts - t0_hta) // 1000) for n, ts in hta_gpu}
    common = ours_gpu & hta_rel
    assert len(common) >= 0.5 * len(hta_rel), (len(common), len(hta_rel), len(ours_gpu))


def test_syntax() -> None:
    assert syntax.parse_factor("0.5") == 0.5
    assert syntax.parse_factor("2x") == 0.5
    assert syntax.parse_factor("2x faster") == 0.5
    assert syntax.parse_factor("4x slower") == 4.0
    scale = syntax.parse_scale("name~a=b=2x faster")
    assert (scale.target, scale.factor) == ("name~a=b", 0.5)
    assert syntax.parse_host("optimizer=0.25").region == "optimizer"
    assert syntax.parse_host("0.5").region is None
    for bad in ("gemm", "=0.5", "gemm=fast", "gemm=-1"):
        with pytest.raises(TransformError):
            syntax.parse_scale(bad)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = scenario(tmp_path, sync=True)
    runner = CliRunner()
    ok = runner.invoke(app, ["whatif", trace.meta.path, "--scale", "gemm=2x", "--format", "json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.output)
    # the shared envelope: header, the changes as options, the result under "whatif"
    assert doc["kind"] == "whatif" and doc["sections"] == ["whatif"] and doc["schema_version"] == 2
    assert doc["options"]["changes"] == ["device work gemm × 0.5"]  # 2x faster
    assert doc["whatif"]["after_ns"] == int((H + LAT + G / 2 + SYNC_POST) * 1000)
    assert doc["whatif"]["steady_after_ns"] == doc["whatif"]["after_ns"]  # every step alike
    text = runner.invoke(app, ["whatif", trace.meta.path, "--remove", "cudaDeviceSynchronize"])
    assert text.exit_code == 0 and "step time" in text.output and "median step" in text.output
    out = tmp_path / "w.json"
    wrote = runner.invoke(app, ["whatif", trace.meta.path, "--graphs", "-f", "json", "-o", str(out)])
    assert wrote.exit_code == 0 and json.loads(out.read_text())["kind"] == "whatif"
    capsys.readouterr()
    assert main(["whatif", trace.meta.path, "--graphs", "-o", str(out)]) == 2  # exists: --force
    assert main(["whatif", trace.meta.path, "--graphs", "-o", str(out), "--force"]) == 0
    for args in (["--scale", "nofamily=0.5"], ["--scale", "gemm"], ["--remove", "("], [], ["--host", "x=y"]):
        capsys.readouterr()
        assert main(["whatif", trace.meta.path, *args]) == 2, args
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err


def test_api(tmp_path: Path) -> None:
    trace = scenario(tmp_path, sync=True)
    result = ti.whatif(trace, scale=["gemm=0.5"], host=["0.5"])
    assert result.after_ns == int((H / 2 + LAT + G / 2 + SYNC_POST) * 1000)
    assert "steps" in result.to_dict()


def test_stream_wait_named_by_cuda_sync(tmp_path: Path) -> None:
    """Kernel B (stream 8) waits, through an event, for kernel A (stream 7) and starts 20 µs
    after it ends: too late for the wait to be read off timing alone, so only the cuda_sync
    event ties them. Halving A moves B by as much."""
    events = [
        op("ProfilerStep#1", 0, 12, cat="user_annotation"),
        launch("cudaLaunchKernel", 1, 3, correlation=1),
        launch("cudaEventRecord", 5, 1, correlation=2),
        launch("cudaStreamWaitEvent", 6, 1, correlation=3),
        launch("cudaLaunchKernel", 7, 3, correlation=4),
        kernel("ampere_sgemm_128x64_nn", 10, 100, correlation=1, stream=7),
        kernel("elementwise_kernel", 130, 10, correlation=4, stream=8),
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 8, "ts": 7, "dur": 0,
         "args": {"stream": 8, "wait_on_stream": 7, "correlation": 3, "device": 0, "wait_on_cuda_event_record_corr_id": 2}},
    ]
    trace = ti.load(write_trace(tmp_path / "wait.json", events, baseTimeNanoseconds=0), cache=False)
    graph = build(trace)
    assert graph.stats["stream_waits"] == 1
    result = whatif(trace, [ScaleKernels("gemm", 0.5)], graph)
    assert _us(result, 1) == (140.0, 90.0)


def _backward_on_another_thread(tmp_path: Path) -> ti.Trace:
    """Per step (hand-made): the forward launches one kernel on the main thread; the backward
    runs on another thread (700 µs of host ops, one kernel); the main thread waits inside its
    ProfilerStep (no span: the annotation's own time) and then runs the optimizer, which
    launches one kernel. The step ends with the optimizer's kernel."""
    events = []
    corr = 1
    for i in range(5):
        t = 1000.0 + i * 1000.0
        events.append(op("aten::linear", t, 40))
        events.append(launch("cudaLaunchKernel", t + 30, 5, correlation=corr))
        events.append(kernel("ampere_sgemm_128x64_nn", t + 40, 50, correlation=corr))
        bwd = t + 60
        events.append(op("autograd::engine::evaluate_function: MmBackward0", bwd, 700, tid=2))
        events.append(launch("cudaLaunchKernel", bwd + 690, 5, correlation=corr + 1, tid=2))
        events.append(kernel("ampere_sgemm_128x64_nt", bwd + 698, 20, correlation=corr + 1))
        opt = bwd + 710  # the main thread wakes when the backward returns
        events.append(op("Optimizer.step#SGD.step", opt, 60))
        events.append(launch("cudaLaunchKernel", opt + 50, 5, correlation=corr + 2))
        events.append(kernel("multi_tensor_apply_kernel", opt + 58, 10, correlation=corr + 2))
        events.append(op(f"ProfilerStep#{i}", t, opt + 70 - t, cat="user_annotation"))
        corr += 3
    path = write_trace(tmp_path / "threads.json", events, baseTimeNanoseconds=0)
    return ti.load(path, cache=False)


def test_a_thread_waiting_inside_its_step_annotation_follows_the_thread_that_woke_it(tmp_path: Path) -> None:
    trace = _backward_on_another_thread(tmp_path)
    faster = whatif(trace, [ShrinkHost(r"^autograd::engine", 0.5)])
    assert faster.explained
    before, after = _us(faster)
    # host start to the step annotation's end, 2 µs after the optimizer kernel's
    assert before == pytest.approx(840.0, abs=1.0)
    # the backward's 700 µs halved: the optimizer, woken by it, starts 350 µs earlier
    assert before - after == pytest.approx(350.0, abs=10.0)
    # host time of the main thread itself is still its own: halving it moves the step by
    # what the main thread does (40 + 60 µs of ops), not by the time it spent waiting
    main = whatif(trace, [ShrinkHost(r"^(aten::linear|Optimizer)", 0.5)])
    assert _us(main)[0] - _us(main)[1] == pytest.approx(50.0, abs=10.0)


def test_remove_keeps_the_calls_inside_the_named_spans(tmp_path: Path) -> None:
    # Hand-made: the serialized scenario, with every second step's sync inside a collective's
    # host span (a gloo all-reduce staging a CUDA tensor syncs on it).
    trace = scenario(tmp_path, sync=True)
    events = json.loads((tmp_path / "scenario_True.json").read_text())["traceEvents"]
    syncs = [e for e in events if e["name"] == "cudaDeviceSynchronize"]
    for e in syncs[::2]:
        events.append(op("gloo:all_reduce", e["ts"], e["dur"], cat="user_annotation"))
    trace = ti.load(write_trace(tmp_path / "gloo.json", events, baseTimeNanoseconds=0), cache=False)
    every = whatif(trace, [Remove("cudaDeviceSynchronize")])
    outside = whatif(trace, [Remove("cudaDeviceSynchronize", keep_inside="^gloo:")])
    assert every.saving_ns > outside.saving_ns > 0
    assert "not inside ^gloo:" in outside.transformations[0]["description"]
    assert "keep_inside" not in every.transformations[0]


# ---- the recorded variants: predicted from the base trace alone --------------------------

WHATIF = ROOT / "sample_traces" / "whatif"
WHATIF_TIMINGS = {r["name"]: r for r in json.loads((WHATIF / "whatif_timings.json").read_text())}


def _kernel_ratio(variant: str, base: str) -> float:
    return float(WHATIF_TIMINGS[variant]["kernels_per_step"]) / float(WHATIF_TIMINGS[base]["kernels_per_step"])


@pytest.mark.parametrize(
    ("base", "variant", "change"),
    [
        ("whatif_overlap", "whatif_overlap_half_host", "host"),
        ("whatif_overlap", "whatif_overlap_half_gpu", "gpu"),
        ("whatif_sync", "whatif_sync_half_host", "host"),
        ("whatif_sync", "whatif_sync_half_gpu", "gpu"),
        ("whatif_sync", "whatif_sync_dropped", "sync"),
    ],
)
def test_each_recorded_variant_is_predicted_within_15_pct_from_its_base_trace(base: str, variant: str, change: str) -> None:
    # host work h (a spin inside "host_work"), GPU work g (fp32 matmuls), with or without a
    # per-step torch.cuda.synchronize() inside "sync"; each variant recorded and timed with
    # CUDA events outside the profiler (sample_traces/make_whatif_samples.py)
    transform = {
        "host": ShrinkHost("^host_work$", 0.5),
        "gpu": ScaleKernels("gemm", _kernel_ratio(variant, base)),
        "sync": Remove("^sync$"),
    }[change]
    result = whatif(ti.load(WHATIF / f"{base}.json.gz"), [transform])
    assert result.explained
    measured_ms = float(WHATIF_TIMINGS[variant]["measured_ms"])
    predicted_ms = result.steady_after_ns / 1e6
    assert abs(predicted_ms - measured_ms) <= 0.15 * measured_ms, (predicted_ms, measured_ms)


def test_python_frames_that_overlap_ops_do_not_push_launches_past_their_kernels() -> None:
    # memgrow_keep was recorded with with_stack=True: Python frames end a little after the ops
    # inside them. Cutting the earlier segment where the next starts keeps every launch call at
    # its recorded time; pushing the later one (as before) made 323 kernels seem to start
    # before their launch, pinned a third of the device time and replayed every fix as 0 %.
    from traceinsight.analysis.whatif.graph import NEG
    from traceinsight.analysis.whatif.shared import recorded

    trace = ti.load(ROOT / "sample_traces" / "catalogue" / "memgrow_keep.json.gz")
    graph, _ = recorded(trace)
    assert any("run past the next one" in n for n in graph.notes)
    assert not any("before their launch call" in n for n in graph.notes)
    pinned = graph.gpu_anchor_ns > NEG
    assert graph.gpu_dur_ns[pinned].sum() < 0.05 * graph.gpu_dur_ns.sum()
    assert whatif(trace, [CollapseLaunches()]).steady_saving_pct > 2.0  # was 0.0


def test_a_launch_bound_loop_keeps_no_launch_latency_as_a_device_gap(tmp_path: Path) -> None:
    # Hand-made: 200 launches 8 µs apart, each kernel 2 µs starting 7 µs after its launch, so
    # each is launched while the previous one is finishing (it ends 1 µs after the next launch
    # call begins). Those kernels waited for their launch, not their stream: the 6 µs between
    # one kernel's end and the next one's start is launch latency, not a back-to-back gap, and
    # with the launches collapsed (CUDA graphs) the kernels run back to back.
    events = [op("ProfilerStep#1", 0, 1700, cat="user_annotation")]
    for i in range(200):
        t = 10.0 + 8.0 * i
        events.append(launch("cudaLaunchKernel", t, 5, correlation=i + 1))
        events.append(kernel("elementwise_kernel", t + 7, 2, correlation=i + 1))
    trace = ti.load(write_trace(tmp_path / "b2b.json", events, baseTimeNanoseconds=0), cache=False)
    graph = build(trace)
    assert graph.stats["launch_latency_ns"] == 7_000
    assert graph.stats["stream_gap_ns"] == 1_000  # none back to back: the default
    timeline = replay(graph, apply_all(graph, (CollapseLaunches(), ShrinkHost(None, 0.0))))
    # the launches cost the host nothing and start at once: each kernel 2 µs, then the 1 µs
    # default gap; with the launch latency kept as a gap it would take 200 × 8 µs
    span_ns = int(timeline.gpu_end_ns.max() - timeline.gpu_start_ns.min())
    assert span_ns == 200 * 2_000 + 199 * 1_000
