"""torch.compile analysis: markers, compile time, recompiles, graph breaks, kernels and launches.

The hand-made trace below (not recorded by a profiler) copies the event layout torch 2.x
writes for a function with one graph break, compiled inside the profiled window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample_path
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.report import analyze
from traceinsight.analysis.sections import compile as compile_analysis
from traceinsight.cli.app import main
from traceinsight.trace.loader import load

CFG = AnalysisConfig()


def _x(cat: str, name: str, ts: float, dur: float, args: dict[str, Any] | None = None, *, pid: int = 100, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args or {}}


def graph_break_trace(path: Path, steps: int = 3) -> Path:
    """Step 0 compiles frame 0 (0/0), then its resume frame 1 (1/1: a recompile); every step then
    runs region 0/0 holding an eager ``aten::item`` and the nested region of frame 1."""
    ev: list[dict[str, Any]] = []
    corr = 1
    ts = 0.0
    for step in range(steps):
        t = ts
        ev.append(_x("user_annotation", f"ProfilerStep#{step}", t, 900.0))
        if step == 0:
            ev.append(_x("cpu_op", "entire_frame_compile", t + 1, 300.0))
            ev.append(_x("user_annotation", "entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/0", t + 2, 1.0))
            ev.append(_x("cpu_op", "_compile.compile_inner (dynamo_timed)", t + 3, 290.0))
            ev.append(_x("cpu_op", "inductor_compile", t + 10, 200.0))
            t += 310.0
        else:
            ev.append(_x("cpu_op", "TorchDynamo Cache Lookup", t + 1, 4.0))
            t += 10.0
        ev.append(_x("cpu_op", "Torch-Compiled Region: 0/0", t, 400.0 if step == 0 else 100.0))
        ev.append(_x("cpu_op", "Pregraph bytecode", t + 1, 1.0))
        ev.append(_x("cpu_op", "CompiledFunction", t + 3, 20.0))
        ev.append(_x("user_annotation", "## Call CompiledFxGraph fkeyzero ##", t + 4, 15.0))
        ev.append(_x("cpu_op", "triton_poi_fused_add_0", t + 5, 8.0))
        ev.append(_x("cuda_driver", "cuLaunchKernel", t + 6, 4.0, {"correlation": corr}))
        ev.append(_x("kernel", "triton_poi_fused_add_0", t + 12, 6.0, {"correlation": corr, "device": 0, "stream": 7}, pid=0, tid=7))
        corr += 1
        # Inductor's own launcher recorded straight under the region: compiled work, no break.
        ev.append(_x("cpu_op", "triton_poi_fused_add_cos_sin_0", t + 25, 3.0))
        ev.append(_x("cpu_op", "aten::item", t + 30, 5.0))  # the graph break
        inner = t + 40
        if step == 0:
            ev.append(_x("cpu_op", "entire_frame_compile", inner, 250.0))
            ev.append(_x("user_annotation", "entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=1/1", inner + 1, 1.0))
            inner += 260.0
        else:
            ev.append(_x("cpu_op", "TorchDynamo Cache Lookup", inner, 3.0))
            inner += 5.0
        ev.append(_x("cpu_op", "Torch-Compiled Region: 1/1", inner, 40.0))
        ev.append(_x("cpu_op", "CompiledFunction", inner + 2, 30.0))
        ev.append(_x("user_annotation", "## Call CompiledFxGraph fkeyone ##", inner + 3, 20.0))
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", inner + 4, 5.0, {"correlation": corr}))
        ev.append(_x("kernel", "sm90_xmma_gemm_bf16", inner + 20, 30.0, {"correlation": corr, "device": 0, "stream": 7}, pid=0, tid=7))
        corr += 1
        ts += 1000.0
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Hand-made GPU"}],
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceEvents": ev,
    }
    path.write_text(json.dumps(doc, separators=(",", ":")))
    return path


@pytest.fixture
def broken(tmp_path: Path) -> compile_analysis.CompileResult:
    return compile_analysis.run(load(graph_break_trace(tmp_path / "gb.json"), cache=False), CFG)


def test_compile_time_is_the_union_of_compile_spans(broken: compile_analysis.CompileResult) -> None:
    assert broken.available
    assert broken.compiles_in_trace == 2
    # 300 µs outer frame compile (its nested spans not counted twice) + 250 µs of the resume frame.
    assert broken.compile_ns == 550_000
    events = broken.compile_events
    assert events["compile_id"].to_list() == ["0/0", "1/1"]
    assert events["fn_name"].to_list() == ["_compile.compile_inner", "_compile.compile_inner"]
    assert events["step"].to_list() == [0, 0]


def test_recompiles_are_found(broken: compile_analysis.CompileResult) -> None:
    assert broken.frames == (0, 1)
    assert broken.recompiled_frames == (1,)
    assert broken.recompiles_in_trace == 1
    assert any("recompile" in f for f in broken.findings)


def test_graph_break_ops_are_named(broken: compile_analysis.CompileResult) -> None:
    assert broken.regions_per_step == 2.0
    names = broken.graph_break_ops["name"].to_list()
    assert names == ["aten::item"]  # not Dynamo's glue, graphs or compile spans
    assert broken.graph_break_ops["calls_per_step"].item() == 1.0
    assert any("graph breaks" in f and "aten::item" in f for f in broken.findings)


def test_kernels_launches_and_dynamo_overhead(broken: compile_analysis.CompileResult) -> None:
    assert broken.steps == 3
    assert broken.kernels_per_step == 2.0
    assert broken.compiled_kernels_per_step == 2.0
    assert broken.triton_kernels_per_step == 1.0
    assert broken.triton_share == pytest.approx(6 / 36)
    assert broken.launches_per_step == 2.0
    assert broken.launch_api_ns_per_step == pytest.approx(9_000 / 1)
    # Two steps with two lookups each (4 + 3 µs); the compile step had none.
    assert broken.cache_lookups_per_step == pytest.approx(4 / 3)
    assert broken.cache_lookup_ns_per_step == pytest.approx(14_000 / 3)
    assert not broken.uses_cuda_graphs
    graphs = broken.regions.filter(broken.regions["kind"] == "fx_graph")
    assert sorted(graphs["graph_key"].to_list()) == ["fkeyone", "fkeyzero"]
    assert sorted(graphs["kernels_per_step"].to_list()) == [1.0, 1.0]


def test_eager_trace_is_not_available_with_reason(sample_trace: Any) -> None:
    result = compile_analysis.run(sample_trace("train_eager"), CFG)
    assert not result.available
    assert result.reason is not None and "torch.compile" in result.reason
    assert result.to_dict()["available"] is False


def test_compiled_sample(sample_trace: Any) -> None:
    eager = sample_trace("train_eager")
    result = compile_analysis.run(sample_trace("train_compiled"), CFG)
    assert result.available and result.frames
    assert result.compiles_in_trace == 0  # compiled during the wait steps
    assert 0 < result.triton_kernels_per_step < result.kernels_per_step
    assert result.triton_share is not None and 0 < result.triton_share < 1
    eager_kernels = eager.kernels.filter(eager.kernels["kind"] == "kernel").height / 5
    assert result.kernels_per_step < eager_kernels
    assert result.cache_lookups_per_step >= 1
    # train step calls loss.backward() inside the compiled function: a graph break, whose
    # eager op is the gradient seed; Inductor's launchers are not breaks.
    assert result.graph_break_ops["name"].to_list() == ["aten::ones_like"]
    assert result.graph_break_ops["calls_per_step"].to_list() == [1.0]


def test_cuda_graphs_sample(sample_trace: Any) -> None:
    result = compile_analysis.run(sample_trace("train_cudagraphs"), CFG)
    assert result.uses_cuda_graphs
    assert result.graph_launches_per_step >= 1
    assert result.kernels_via_graphs_per_step > 10 * result.graph_launches_per_step
    assert result.launches_per_step < result.kernels_per_step


def test_registered_section_runs_on_every_kind_of_trace(sample_trace: Any, tmp_path: Path) -> None:
    for name in ("train_eager", "train_compiled", "regimes", "dataloader_w0"):
        report = analyze(sample_trace(name), CFG, only=["compile"])
        data = report.to_dict()["compile"]
        json.dumps(data, allow_nan=False)
        assert isinstance(data["available"], bool)
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"traceEvents": [_x("cpu_op", "aten::add", 0, 1)]}))
    assert not compile_analysis.run(load(empty, cache=False), CFG).available


def test_compile_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(sample_path("train_compiled"))
    out = tmp_path / "compile.json"
    assert main(["compile", path, "--format", "json", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["kind"], data["sections"]) == ("compile", ["compile"])
    assert data["compile"]["available"] is True
    assert main(["compile", path]) == 0
    assert "compiled regions" in capsys.readouterr().out
    assert main(["compile", str(sample_path("train_eager"))]) == 0
    assert "not available" in capsys.readouterr().out


def test_diff_says_why_a_compiled_run_is_slower(tmp_path: Path) -> None:
    from tests.integration.test_diff import hand_made_trace
    from traceinsight.api import diff

    eager = hand_made_trace(tmp_path / "eager.json", [20.0] * 6, kernels=("gemm_kernel_a",))
    compiled = graph_break_trace(tmp_path / "compiled.json", steps=7)
    result = diff(eager, compiled)
    assert result.verdict == "slower"
    comp = result.compile
    assert comp.available and comp.compiled_side == "compiled"
    text = "\n".join(comp.findings)
    assert "the compiled run is slower" in text
    assert "compilation inside the trace" in text
    assert "recompiles" in text
    assert "aten::item" in text
    assert "more GPU kernel time per step" in text
    # The other way round (going back to eager helps) still blames the compiled side.
    reverse = diff(compiled, eager)
    assert reverse.verdict == "faster"
    assert any("the compiled run is slower" in f for f in reverse.compile.findings)
    # A compiled run that is faster gets no excuses.
    fast_eager = hand_made_trace(tmp_path / "slow_eager.json", [5000.0] * 6, kernels=("gemm_kernel_a",))
    assert not any("slower" in f for f in diff(fast_eager, compiled).compile.findings)


def test_compile_inside_the_recorded_window(sample_trace: Any) -> None:
    result = compile_analysis.run(sample_trace("train_compiled_with_compile"), CFG)
    assert result.available
    assert result.compiles_in_trace >= 1
    assert result.compile_events["compile_id"].to_list()[0] == "0/0"
    assert result.compile_events["step"].to_list()[0] == result.compile_events["step"].min()
    # The first call traces, lowers and loads the graphs: far longer than a steady-state step.
    assert result.compile_ns > 100_000_000
    assert result.compile_ns >= max(result.compile_events["dur_ns"].to_list())
    assert any("compile(s) inside the trace" in f for f in result.findings)
