"""Loop iterations stand in for steps when a trace has no ProfilerStep spans.

Recorded ground truth: ``sample_traces/decode/`` (decode loops under a plain ``profile()``,
per-token latency timed without the profiler in ``decode_timings.json``). Edge cases on
hand-made traces (written by hand, not recorded).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.handmade import HandMadeTrace
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections.overview import OverviewResult
from traceinsight.analysis.sections.steps import StepsResult
from traceinsight.analysis.window.spec import WindowResult
from traceinsight.trace.iterations import describe
from traceinsight.trace.loader import load
from traceinsight.trace.model import Trace

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "sample_traces" / "decode"
THIRD = Path(__file__).resolve().parents[3].joinpath("shared/third_party/tracelens")
TIMINGS = {row["name"]: row for row in json.loads((DECODE / "decode_timings.json").read_text())}


def _decode(name: str) -> Trace:
    return load(DECODE / f"{name}.json.gz", cache=False)


def _steps(trace: Trace) -> StepsResult:
    result = run_one(trace, "steps")
    assert isinstance(result, StepsResult)
    return result


def _stat(result: StepsResult, metric: str) -> float:
    return float(result.stats.filter(pl.col("metric") == metric)["mean_ns"][0])


# --- recorded decode loops --------------------------------------------------------------------


def test_decode_eager_has_80_iterations_of_decode_step() -> None:
    trace = _decode("decode_eager")
    assert trace.step_source == "repeated span decode_step"
    result = _steps(trace)
    assert result.steps.height == TIMINGS["decode_eager"]["forwards"] == 80
    assert result.prefill_steps == ()
    # every kernel of the loop belongs to an iteration but the ones launched before it
    assert trace.kernels["step"].null_count() < 0.01 * trace.kernels.height
    # The profiler slows this host-bound loop (~700 recorded ops a token): the traced
    # iteration cannot be faster than the measured one, and the GPU work in it must fit in it.
    measured_ns = TIMINGS["decode_eager"]["ms_per_token"] * 1e6
    mean_ns = _stat(result, "device_dur_ns")
    assert measured_ns <= mean_ns < 2.5 * measured_ns
    kernel_ns = result.steps["kernel_ns"].mean()
    assert 0 < kernel_ns < measured_ns  # type: ignore[operator]


def test_decode_graph_iterations_match_the_measured_token_time() -> None:
    trace = _decode("decode_graph")
    result = _steps(trace)
    assert trace.step_source == "repeated span decode_step"
    replays = trace.events.filter(pl.col("name").cast(pl.String) == "cudaGraphLaunch").height
    assert result.steps.height == replays == 80
    measured_ns = TIMINGS["decode_graph"]["ms_per_token"] * 1e6
    assert _stat(result, "device_dur_ns") == pytest.approx(measured_ns, rel=0.10)


def test_hf_generate_finds_each_forward_and_labels_the_prefill() -> None:
    trace = _decode("hf_generate")
    result = _steps(trace)
    # no span per token: found from the launch sequence, one iteration per forward
    assert trace.step_source == "periodic kernels"
    forwards = trace.events.filter(pl.col("name").cast(pl.String) == "aten::embedding").height // 2
    assert result.steps.height == forwards == TIMINGS["hf_generate"]["forwards"]
    assert result.prefill_steps == (0,)
    assert result.steps.filter(pl.col("step") == 0)["is_warmup"].to_list() == [False]
    # the decode statistics leave the prefill out
    assert result.stats["steps"].to_list()[0] == result.steps.height - 1


def test_overview_and_window_say_how_the_iterations_were_found() -> None:
    trace = _decode("decode_eager")
    overview = run_one(trace, "overview")
    assert isinstance(overview, OverviewResult)
    assert overview.step_source == "repeated span decode_step"
    line = describe(overview.step_source, len(overview.steps))
    assert line == "iterations: 80 \u00d7 decode_step (found from a repeated span, no ProfilerStep)"
    window = run_one(trace, "window")
    assert isinstance(window, WindowResult)
    flag = next(f for f in window.flags if f.id == "steps")
    assert flag.title == "iterations without ProfilerStep"
    assert "80 loop iterations" in flag.evidence


def test_profilerstep_samples_keep_their_steps(sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("fix_launch_before")
    assert trace.step_source == "ProfilerStep"
    assert trace.meta.iterations is None
    assert trace.step_spans().height == trace.events.filter(
        pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#")
    )["name"].n_unique()


@pytest.mark.skipif(not THIRD.is_dir(), reason="third-party traces not present")
@pytest.mark.parametrize(
    "path",
    [
        "vllm_decode_full/graph_execution.json.gz",
        "vllm_prefilldecode_piecewise/graph_execution.json.gz",
        "sglang_decode/decode.json.gz",
        # one forward captured: its 24 compiled layer graphs run inside one capture_… call
        "vllm_prefilldecode_piecewise/graph_capture_rank_0.json.gz",
    ],
)
def test_one_engine_step_is_not_cut_into_layers(path: str) -> None:
    # each vLLM/SGLang trace holds one serving-engine step: its 24 layers are not iterations
    trace = load(THIRD / path, cache=False)
    assert trace.step_source is None


@pytest.mark.skipif(not THIRD.is_dir(), reason="third-party traces not present")
def test_the_normalization_benchmark_loop_is_three_iterations() -> None:
    # ten annotated normalization layers, an mse_loss and a backward on autograd's thread, run
    # three times (the first slow: each layer's first call); no span holds an iteration
    trace = load(THIRD / "normalization_layers.json.gz", cache=False)
    assert trace.step_source == "repeated call BatchNorm affine=True"
    layer_calls = trace.events.filter(
        (pl.col("kind").cast(pl.String) == "user_annotation") & pl.col("name").cast(pl.String).str.contains(r"Norm affine=")
    ).height
    spans = trace.step_spans()
    assert spans.height == 3 == layer_calls // 10
    assert trace.prefill_steps == ()
    # each iteration holds its own backward: every kernel belongs to one
    assert trace.kernels["step"].null_count() == 0


# --- hand-made edge cases ---------------------------------------------------------------------


def _loop(t: HandMadeTrace, name: str, count: int, start: float, *, period: float = 100.0,
          kernels: int = 3, kernel_us: float = 10.0, first_kernel_us: float | None = None) -> float:
    """``count`` annotations ``name`` back to back, each launching ``kernels`` kernels."""
    ts = start
    for i in range(count):
        t.host(name, ts, period - 2, cat="user_annotation")
        for k in range(kernels):
            dur = first_kernel_us if (i == 0 and first_kernel_us) else kernel_us
            t.gpu(f"kernel_{k}", ts + 10 + 25 * k, dur, launch_ts=ts + 2 + 20 * k)
        ts += period
    return ts


def _load(t: HandMadeTrace, tmp_path: Path) -> Trace:
    return load(t.write(tmp_path / "trace.json"), cache=False)


def test_a_repeated_annotation_is_found(tmp_path: Path) -> None:
    t = HandMadeTrace()
    _loop(t, "decode_step", 5, 0.0)
    trace = _load(t, tmp_path)
    assert trace.step_source == "repeated span decode_step"
    assert trace.step_spans()["step"].to_list() == [0, 1, 2, 3, 4]
    assert trace.kernels["step"].to_list() == [s for s in range(5) for _ in range(3)]


def test_one_long_call_is_not_iterations(tmp_path: Path) -> None:
    # one forward: a single annotation whose operators (aten::linear per layer) repeat
    t = HandMadeTrace()
    t.host("forward", 0, 1000, cat="user_annotation")
    for layer in range(6):
        t.host("aten::linear", 10 + 150 * layer, 100)
        t.gpu("gemm", 20 + 150 * layer, 50, launch_ts=15 + 150 * layer)
    trace = _load(t, tmp_path)
    assert trace.step_source is None
    assert not _steps(trace).available


def test_nested_repeats_choose_the_outermost_level(tmp_path: Path) -> None:
    t = HandMadeTrace()
    for call in range(4):
        base = 1000.0 * call
        t.host("generate_step", base, 900, cat="user_annotation")
        _loop(t, "forward", 3, base + 10)
    trace = _load(t, tmp_path)
    assert trace.step_source == "repeated span generate_step"
    assert trace.step_spans().height == 4


def test_of_two_repeated_names_the_one_holding_the_work_wins(tmp_path: Path) -> None:
    t = HandMadeTrace()
    end = _loop(t, "decode_step", 6, 0.0, kernels=4)
    # a logging span repeats as often but launches a sliver of the work
    for i in range(6):
        t.host("log_metrics", end + 30.0 * i, 20, cat="user_annotation")
        t.gpu("reduce", end + 30.0 * i + 8, 2, launch_ts=end + 30.0 * i + 2)
    trace = _load(t, tmp_path)
    assert trace.step_source == "repeated span decode_step"


def test_a_periodic_launch_sequence_without_spans(tmp_path: Path) -> None:
    # a loop of bare operators, as HF generate runs a forward: no span per iteration
    t = HandMadeTrace()
    for i in range(6):
        base = 200.0 * i
        for k, op_name in enumerate(("aten::embedding", "aten::mm", "aten::add", "aten::argmax")):
            t.host(op_name, base + 40 * k, 30)
            t.gpu(f"kernel_{op_name}", base + 40 * k + 10, 15, launch_ts=base + 40 * k + 2)
    trace = _load(t, tmp_path)
    assert trace.step_source == "periodic kernels"
    spans = trace.step_spans()
    assert spans.height == 6
    assert spans["host_start_ns"].diff().drop_nulls().to_list() == [200_000] * 5


def test_a_first_iteration_with_far_more_gpu_work_is_a_prefill(tmp_path: Path) -> None:
    t = HandMadeTrace()
    _loop(t, "decode_step", 6, 0.0, period=200.0, kernel_us=10.0, first_kernel_us=60.0)
    trace = _load(t, tmp_path)
    assert trace.prefill_steps == (0,)
    result = _steps(trace)
    assert result.prefill_steps == (0,)
    # statistics over the decode iterations only
    assert result.stats["steps"].to_list()[0] == 5


def test_a_profilerstep_trace_is_unchanged(tmp_path: Path) -> None:
    t = HandMadeTrace()
    for n in range(3):
        t.step(n + 7, 300.0 * n, 250)
        # a repeated annotation inside each step does not replace the steps
        _loop(t, "decode_step", 2, 300.0 * n + 10)
    trace = _load(t, tmp_path)
    assert trace.step_source == "ProfilerStep"
    assert trace.meta.iterations is None
    assert trace.step_spans()["step"].to_list() == [7, 8, 9]


# --- training loops without ProfilerStep --------------------------------------------------------

AUTOGRAD_TID = 2
DATALOADER_NEXT = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def _training_loop(t: HandMadeTrace, iterations: int, *, layers: int = 5, first_extra_us: float = 0.0,
                   loader: bool = True, optimizer: bool = True) -> None:
    """A ResNet-like training loop as eager PyTorch records it without ProfilerStep: the
    DataLoader's ``__next__`` and the forward on the main thread, the backward on autograd's
    own thread (one ``evaluate_function`` per node, so ``ConvolutionBackward0`` recurs once per
    layer), then ``zero_grad`` and the optimizer step on the main thread. ``first_extra_us``
    lengthens the first iteration's convolutions (cuDNN's benchmark search)."""
    period = 2000.0
    for i in range(iterations):
        base = period * i
        ts = base
        if loader:
            t.host(DATALOADER_NEXT, ts, 60, cat="user_annotation")
        ts += 70
        t.host("aten::to", ts, 20)
        t.gpu("Memcpy HtoD (Pageable -> Device)", ts + 10, 15, cat="gpu_memcpy", launch_ts=ts + 5,
              launch_name="cudaMemcpyAsync")
        ts += 30
        extra = first_extra_us if i == 0 else 0.0
        for _layer in range(layers):
            for op_name, kernel_name, dur in (("aten::conv2d", "implicit_gemm_fprop", 12 + extra),
                                              ("aten::batch_norm", "bn_fw_kernel", 4.0),
                                              ("aten::relu_", "relu_kernel", 2.0)):
                t.host(op_name, ts, 18)
                t.gpu(kernel_name, ts + 6, dur, launch_ts=ts + 4)
                ts += 20
        t.host("aten::mse_loss", ts, 18)
        t.gpu("mse_kernel", ts + 6, 2, launch_ts=ts + 4)
        ts += 20
        for _layer in range(layers):
            for node, kernels in (("ReluBackward0", ("relu_bwd",)), ("NativeBatchNormBackward0", ("bn_bwd",)),
                                  ("ConvolutionBackward0", ("dgrad_kernel", "wgrad_kernel"))):
                t.host(f"autograd::engine::evaluate_function: {node}", ts, 30, tid=AUTOGRAD_TID)
                t.host(node, ts + 1, 28, tid=AUTOGRAD_TID)
                for k, kernel_name in enumerate(kernels):
                    t.gpu(kernel_name, ts + 8 + 8 * k, 6 + extra, launch_ts=ts + 3 + 8 * k, tid=AUTOGRAD_TID)
                ts += 32
        if optimizer:
            t.host("Optimizer.zero_grad#SGD.zero_grad", ts, 10, cat="user_annotation")
            t.host("Optimizer.step#SGD.step", ts + 15, 40, cat="user_annotation")
            t.host("aten::_foreach_add_", ts + 18, 30)
            t.gpu("multi_tensor_apply_kernel", ts + 30, 10, launch_ts=ts + 20)


def test_a_training_loop_is_cut_at_its_iterations_not_at_a_backward_node(tmp_path: Path) -> None:
    # The backward thread launches most of the work, and ConvolutionBackward0 holds most of
    # that thread's launches, once per layer: 5 layers x 6 iterations would be 30 "steps".
    t = HandMadeTrace()
    _training_loop(t, 6)
    trace = _load(t, tmp_path)
    assert trace.step_source is not None and DATALOADER_NEXT in trace.step_source
    spans = trace.step_spans()
    assert spans.height == 6
    assert spans["host_start_ns"].diff().drop_nulls().to_list() == [2_000_000] * 5
    # every kernel, backward's included, belongs to the iteration that launched it
    per_step = trace.kernels.group_by("step").len().sort("step")
    assert per_step["step"].to_list() == list(range(6))
    assert set(per_step["len"].to_list()) == {1 + 5 * 3 + 1 + 5 * 4 + 1}
    assert not _steps(trace).prefill_steps
    assert describe(trace.step_source, 6) == f"iterations: 6, one per {DATALOADER_NEXT} (found from a top-level call, no ProfilerStep)"
    window = run_one(trace, "window")
    assert isinstance(window, WindowResult)
    flag = next(f for f in window.flags if f.id == "steps")
    assert "top-level call recurring once per iteration" in flag.evidence


def test_without_a_dataloader_the_optimizer_step_marks_the_iterations(tmp_path: Path) -> None:
    t = HandMadeTrace()
    _training_loop(t, 5, loader=False)
    trace = _load(t, tmp_path)
    spans = trace.step_spans()
    # the first iteration's forward and backward come before the first optimizer call: the
    # loop is still 5 iterations, the first from its first launch
    assert spans.height == 5
    assert trace.kernels["step"].null_count() <= 1


def test_a_training_loop_never_has_prefill_steps(tmp_path: Path) -> None:
    # a first training iteration whose GPU work takes far longer (cuDNN's benchmark search) is a
    # warm-up, not a prompt's prefill
    t = HandMadeTrace()
    _training_loop(t, 6, first_extra_us=60.0)
    trace = _load(t, tmp_path)
    assert trace.step_spans().height == 6
    assert trace.prefill_steps == ()
    result = _steps(trace)
    assert result.prefill_steps == ()
    # what would make a decode loop's first iteration a prefill holds: far more GPU time
    kernel_ns = result.steps["kernel_ns"]
    assert kernel_ns[0] > 2 * kernel_ns[1:].median()  # type: ignore[operator]


def test_a_training_loop_without_loader_or_optimizer_calls_is_found_from_all_threads(tmp_path: Path) -> None:
    # no call marks the iterations: the launch sequence of both threads repeats once per
    # iteration, while the backward thread's alone repeats once per layer
    t = HandMadeTrace()
    _training_loop(t, 6, loader=False, optimizer=False)
    trace = _load(t, tmp_path)
    assert trace.step_source == "periodic kernels"
    assert trace.step_spans().height == 6
    assert trace.kernels.group_by("step").len()["len"].to_list() == [1 + 5 * 3 + 1 + 5 * 4] * 6
