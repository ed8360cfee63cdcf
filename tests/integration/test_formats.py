"""Trace formats whose sections used to go missing: 2021-era PyTorch and MTIA.

The traces here are hand-made, reduced faithfully from the formats those profilers write:
the 2021 kineto tb_plugin test traces (``ProfilerStep#N`` with cat ``Operator``, capitalised
``Kernel``/``Memcpy``/``Runtime`` cats, ``[memory]`` events with only ``Bytes``) and MTIA
device work (cat ``mtia_ccp_events`` on a pid named "MTIA N").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from tests.handmade import op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections.gaps import run as run_gaps
from traceinsight.analysis.sections.steps import run as run_steps
from traceinsight.trace.loader import load

HOST = 1000


def _old_event(cat: str, name: str, ts: float, dur: float, *, pid: Any = HOST, tid: Any = HOST,
               args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args or {}}


def old_2021_trace(path: Path, steps: int = 3, step_us: float = 1000.0, kernel_us: float = 300.0) -> Path:
    """Hand-made, after the kineto tb_plugin 2021 test traces: Operator steps, capitalised
    device cats, text tids ("stream 7"), no baseTimeNanoseconds."""
    events: list[dict[str, Any]] = []
    corr = 100
    for i in range(steps):
        t0 = 1_000.0 + i * step_us
        # the host's step ends after its calls; the device work runs on after it
        events.append(_old_event("Operator", f"ProfilerStep#{i + 1}", t0, 60))
        events.append(_old_event("Operator", "aten::mm", t0 + 10, 50, args={"External id": corr}))
        events.append(_old_event("Runtime", "cudaLaunchKernel", t0 + 20, 10,
                                 args={"correlation": corr, "external id": corr}))
        events.append(_old_event("Kernel", "void gemm_kernel<float>", t0 + 40, kernel_us, pid=0,
                                 tid="stream 7", args={"correlation": corr, "external id": corr,
                                                       "device": 0, "stream": 7}))
        events.append(_old_event("Runtime", "cudaMemcpyAsync", t0 + 35, 10,
                                 args={"correlation": corr + 1, "external id": corr}))
        events.append(_old_event("Memcpy", "Memcpy HtoD (Pageable -> Device)", t0 + 50 + kernel_us, 20,
                                 pid=0, tid="stream 7",
                                 args={"correlation": corr + 1, "device": 0, "stream": 7,
                                       "bytes": 4096}))
        corr += 2
    return write_trace(path, events)


def mtia_trace(path: Path) -> Path:
    """Hand-made MTIA trace: host steps and runtime calls, device work as mtia_ccp_events on
    a pid named "MTIA 0"."""
    events: list[dict[str, Any]] = []
    for i in range(3):
        t0 = 1_000.0 + i * 1_000.0
        events.append(op(f"ProfilerStep#{i}", t0, 990, cat="user_annotation"))
        events.append(op("aten::add", t0 + 10, 40))
        events.append(op("mtiaLaunchKernel", t0 + 20, 10, cat="mtia_runtime",
                         args={"correlation": 10 + i}))
        events.append(_old_event("mtia_ccp_events", "add_kernel", t0 + 100, 600, pid="MTIA 0",
                                 tid="stream 1", args={"correlation": 10 + i}))
    return write_trace(path, events, baseTimeNanoseconds=1_700_000_000_000_000_000)


def test_old_operator_steps_are_steps(tmp_path: Path) -> None:
    trace = load(old_2021_trace(tmp_path / "old.json"), cache=False)
    assert trace.step_spans()["step"].to_list() == [1, 2, 3]
    steps = run_steps(trace, AnalysisConfig())
    assert steps.available, steps.reason
    # Step spans are not ops: nothing is attributed to "ProfilerStep#N" as an operator.
    assert trace.kernels["top_op_name"].cast(pl.String).to_list().count("aten::mm") == 6
    assert set(trace.kernels["step"].to_list()) == {1, 2, 3}


def test_old_capitalised_device_cats_are_device_work(tmp_path: Path) -> None:
    trace = load(old_2021_trace(tmp_path / "old.json"), cache=False)
    kinds = trace.kernels["kind"].cast(pl.String).value_counts().sort("kind")
    assert dict(kinds.iter_rows()) == {"kernel": 3, "memcpy": 3}
    assert trace.kernels["launch_name"].null_count() == 0
    assert trace.gpu_devices == [0]


def test_mtia_device_work_is_seen(tmp_path: Path) -> None:
    trace = load(mtia_trace(tmp_path / "mtia.json"), cache=False)
    assert trace.has_gpu
    assert trace.gpu_devices == [0]
    assert trace.kernels["launch_name"].cast(pl.String).to_list() == ["mtiaLaunchKernel"] * 3
    gaps = run_gaps(trace, AnalysisConfig())
    assert gaps.available, gaps.reason


def old_memory_trace(path: Path) -> Path:
    """Hand-made, after 2021-era profile_memory traces: ``[memory]`` events with only
    ``Bytes`` (no Total Allocated / Total Reserved), on device 0 and the CPU."""
    events: list[dict[str, Any]] = [_old_event("Operator", "ProfilerStep#1", 0, 10_000)]
    mib = 1 << 20
    sizes = [19 * mib, 1024 * mib, 1024 * mib, -1024 * mib, 600 * mib, -19 * mib]
    for i, size in enumerate(sizes):
        events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                       "pid": HOST, "tid": HOST, "ts": 100.0 + i * 100,
                       "args": {"Device Type": 1, "Device Id": 0, "Addr": 1000 + i, "Bytes": size}})
    events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                   "pid": HOST, "tid": HOST, "ts": 150.0,
                   "args": {"Device Type": 0, "Device Id": -1, "Addr": 5, "Bytes": 64}})
    return write_trace(path, events)


def test_memory_peak_without_totals_is_the_running_sum(tmp_path: Path) -> None:
    from traceinsight.analysis.sections.memory import run as run_memory

    result = run_memory(load(old_memory_trace(tmp_path / "mem.json"), cache=False), AnalysisConfig())
    assert result.available, result.reason
    cuda = result.peaks.filter(pl.col("device") == "cuda:0").row(0, named=True)
    # 19 MiB + 1 GiB + 1 GiB, before the first free: not the first event's 19 MiB.
    assert cuda["peak_allocated_bytes"] == (19 + 2048) << 20
    assert any("running sum" in note for note in result.notes)


def test_tiny_cpu_totals_are_not_peaks(sample_trace: Any) -> None:
    from traceinsight.analysis.sections.memory import run as run_memory

    # Recorded with profile_memory on torch 2.x: the CPU's "Total Allocated" reaches 32 B.
    result = run_memory(sample_trace("train_eager"), AnalysisConfig())
    assert result.peaks["device"].to_list() == ["cuda:0"]
    assert result.peaks["peak_allocated_bytes"].item() > 1 << 30
    assert any(note.startswith("cpu: peak allocated 32 B") for note in result.notes)


def test_diff_gate_on_old_format_steps(tmp_path: Path) -> None:
    """The CI gate where it matters: 2 vs 2 steps cannot show a significant change (exit 0
    even at a 0 % threshold); 10 vs 10 steps with the kernel twice as long exit 3."""
    from traceinsight.cli.app import main

    two_a = old_2021_trace(tmp_path / "a2.json", steps=2)
    two_b = old_2021_trace(tmp_path / "b2.json", steps=2, kernel_us=600)
    assert main(["diff", str(two_a), str(two_b), "--no-cache", "--fail-on-regression", "0"]) == 0
    fast = old_2021_trace(tmp_path / "fast.json", steps=10)
    slow = old_2021_trace(tmp_path / "slow.json", steps=10, kernel_us=600)
    assert main(["diff", str(fast), str(slow), "--no-cache", "--fail-on-regression", "5"]) == 3
    assert main(["diff", str(slow), str(fast), "--no-cache", "--fail-on-regression", "5"]) == 0


def test_inner_launch_call_wins_a_shared_correlation(tmp_path: Path) -> None:
    """Hand-made: a runtime call and the driver call inside it share one correlation (as
    cudaGraphLaunch / cuLaunchKernel do); the kernel's launch is the inner, later one."""
    events = [
        op("aten::mm", 0, 100),
        op("cudaLaunchKernel", 10, 50, cat="cuda_runtime", args={"correlation": 7}),
        op("cuLaunchKernel", 20, 20, cat="cuda_driver", args={"correlation": 7}),
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 200, "dur": 10,
         "args": {"correlation": 7, "device": 0, "stream": 7}},
    ]
    trace = load(write_trace(tmp_path / "shared.json", events), cache=False)
    assert trace.kernels["launch_name"].cast(pl.String).to_list() == ["cuLaunchKernel"]
    assert trace.kernels["launch_ts_ns"].to_list() == [20_000]
