"""host_preprocessing and memory_growth: the recorded pairs of ``sample_traces/catalogue``
(measured by CUDA events outside the profiler, ``timings.json``) and edge cases on hand-made
traces (written by hand, not recorded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.findings_helpers import by_id, context, findings, ids, write_h200
from tests.handmade import TIMELINE_HOST_PID, TIMELINE_MAIN_TID, HandMadeTrace
from traceinsight.analysis.findings.detect.preprocessing import (
    MIN_GAP_NS,
    detect_host_preprocessing,
)
from traceinsight.analysis.findings.verdict.headline import headline
from traceinsight.analysis.report import analyze
from traceinsight.analysis.whatif.model import whatif
from traceinsight.render.sections.findings import saving_text
from traceinsight.trace.loader import load

CATALOGUE = ROOT / "sample_traces" / "catalogue"
CONV = "void cudnn::engine_v8::conv_fprop_kernel(int)"
H2D = "Memcpy HtoD (Pinned -> Device)"
MiB = 2**20


def timings() -> dict[str, dict[str, Any]]:
    return {r["file"].removesuffix(".json.gz"): r for r in json.loads((CATALOGUE / "timings.json").read_text())}


# -- host_preprocessing on the recorded pair --------------------------------------------------


def test_main_thread_preprocessing_named_with_the_measured_saving() -> None:
    t = timings()
    measured = 100.0 * (1 - t["host_pre_gpu"]["ms"] / t["host_pre_main"]["ms"])  # 89.2 %
    trace = load(CATALOGUE / "host_pre_main.json.gz")
    r = findings(trace)
    f = r.findings[0]
    assert f.id == "host_preprocessing"
    assert measured / 1.5 <= f.saving_pct <= measured * 1.5, (f.saving_pct, measured)
    assert f.evidence.regions[0].name == "aten::_upsample_bilinear2d_aa"
    # The replay of its transformation agrees with the claim.
    est = detect_host_preprocessing(context(trace))
    assert est is not None
    replayed = whatif(trace, est.transforms)
    assert replayed.explained and measured / 1.5 <= replayed.saving_pct <= measured * 1.5
    # Counted once: host_bound gave up the same gaps.
    bound = by_id(r, "host_bound")
    assert bound is None or bound.saving_pct < 1.0
    # The fix does not promise DataLoader workers first (they were measured slower here).
    assert f.fix.index("on the GPU") < f.fix.index("DataLoader")


def test_preprocessing_on_the_gpu_leaves_no_material_finding() -> None:
    f = by_id(findings(load(CATALOGUE / "host_pre_gpu.json.gz")), "host_preprocessing")
    assert f is None or not f.material


def test_training_steps_without_input_copies_are_not_preprocessing() -> None:
    for name in ("memgrow_keep", "memgrow_detach"):
        assert "host_preprocessing" not in ids(findings(load(CATALOGUE / f"{name}.json.gz")), material_only=False)


# -- host_preprocessing edges -----------------------------------------------------------------


def prep_trace(*, host_op: str | None = "aten::upsample_bilinear2d", ends_with_copy: bool = True, loader: bool = False,
               between_steps: bool = False, steps: int = 3) -> HandMadeTrace:
    """Per step: 1 ms of host work (``host_op``, or untraced when None) while the GPU idles,
    then the input's copy and a 1 ms convolution. ``between_steps`` puts the host work before
    the step's span begins (where the profiler's own step transition runs)."""
    t = HandMadeTrace()
    ts = 0.0
    for n in range(steps):
        work_start = ts + 10
        step_start = work_start + 1_000 if between_steps else ts
        # the step's host code ends once the convolution is launched; the GPU runs on
        t.step(n + 1, step_start, work_start + 1_082 - step_start)
        if loader:
            t.host("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", work_start, 1_000, cat="user_annotation")
        if host_op is not None:
            t.host(host_op, work_start + 1, 998)
        copy_ts = work_start + 1_010
        if ends_with_copy:
            t.host("aten::copy_", copy_ts - 6, 10)
            t.gpu(H2D, copy_ts, 50, cat="gpu_memcpy", launch_name="cudaMemcpyAsync", launch_ts=copy_ts - 5)
        t.host("aten::conv2d", copy_ts + 60, 10)
        t.gpu(CONV, copy_ts + 70, 1_000, launch_ts=copy_ts + 62)
        ts += 3_000
    return t


def test_cpu_work_before_the_inputs_copy(tmp_path: Path) -> None:
    r = findings(write_h200(prep_trace(), tmp_path / "p.json"))
    f = by_id(r, "host_preprocessing")
    assert f is not None and f.material and f.pool == "idle"
    assert f.evidence.regions[0].name == "aten::upsample_bilinear2d"
    # About 1 ms of idle before each of the three copies.
    assert 2.9e6 <= f.saving_window_ns <= 3.1e6, f.saving_window_ns
    assert dict(f.evidence.figures)["host_compute_ns"] > 0
    # host_bound sees the same gaps (a named culprit): counted once, host_bound gives them up.
    bound = by_id(r, "host_bound")
    assert bound is not None and bound.estimate_ns - bound.saving_window_ns == f.saving_window_ns


def test_untraced_host_work_counts_with_low_confidence(tmp_path: Path) -> None:
    f = by_id(findings(write_h200(prep_trace(host_op=None), tmp_path / "u.json")), "host_preprocessing")
    assert f is not None and f.confidence == "low" and f.evidence.regions[0].name == "(untraced host work)"


def test_not_raised_where_another_finding_owns_the_idle(tmp_path: Path) -> None:
    # Inside a DataLoader: dataloader_stall's.
    r = findings(write_h200(prep_trace(loader=True), tmp_path / "l.json"))
    assert "host_preprocessing" not in ids(r, material_only=False) and "dataloader_stall" in ids(r)
    # Tensors made on the CPU and copied: cpu_tensor_creation's.
    r = findings(write_h200(prep_trace(host_op="aten::arange"), tmp_path / "a.json"))
    assert "host_preprocessing" not in ids(r, material_only=False)
    # A host-side collective copying its result back (gloo): communication, not an input.
    r = findings(write_h200(prep_trace(host_op="gloo:all_reduce"), tmp_path / "c.json"))
    assert "host_preprocessing" not in ids(r, material_only=False)
    # The gap ends at a kernel, no input copy: host_bound's.
    r = findings(write_h200(prep_trace(ends_with_copy=False), tmp_path / "k.json"))
    assert "host_preprocessing" not in ids(r, material_only=False)


def test_host_time_between_profiler_steps_is_not_counted(tmp_path: Path) -> None:
    r = findings(write_h200(prep_trace(host_op=None, between_steps=True), tmp_path / "b.json"))
    assert "host_preprocessing" not in ids(r, material_only=False)


def test_short_host_work_before_a_copy_is_not_preprocessing(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 2_000)
    gap_us = MIN_GAP_NS / 1e3 * 0.8
    t.host("aten::upsample_bilinear2d", 1, gap_us)
    t.gpu(H2D, gap_us + 5, 50, cat="gpu_memcpy", launch_name="cudaMemcpyAsync", launch_ts=gap_us + 2)
    t.gpu(CONV, gap_us + 60, 1_500)
    assert "host_preprocessing" not in ids(findings(write_h200(t, tmp_path / "s.json")), material_only=False)


# -- memory_growth ----------------------------------------------------------------------------


def test_kept_logits_named_with_the_measured_growth_and_the_line() -> None:
    t = timings()
    trace = load(CATALOGUE / "memgrow_keep.json.gz")
    r = findings(trace)
    f = by_id(r, "memory_growth")
    assert f is not None and f.material and f.saving_pct == 0.0 and f.estimate_ns == 0
    growth = dict(f.evidence.figures)["growth_per_step_bytes"]
    measured = t["memgrow_keep"]["growth_bytes_per_step"]  # 205,852,672 by memory_allocated
    assert measured / 1.5 <= growth <= measured * 1.5
    # The line that called the model (whose output the loop keeps), and the op that made it.
    assert f.evidence.locations[0] == "make_catalogue_pairs.py:203"
    assert f.evidence.ops[0].name.startswith("aten::mm")
    assert "detach" in f.confidence_reason and "autograd graph" in f.confidence_reason
    # Listed after the time findings, with its growth instead of a time saving.
    assert r.findings[-1].id == "memory_growth"
    assert saving_text(f, r) == "no time saving claimed; allocated memory grows 196.3 MiB per step"
    verdict = headline(analyze(trace).sections).verdict
    assert "grows 196.3 MiB per step" in verdict and "[memory_growth]" in verdict


def test_detached_losses_do_not_grow() -> None:
    assert "memory_growth" not in ids(findings(load(CATALOGUE / "memgrow_detach.json.gz")), material_only=False)


def memory_trace(growth: list[int], reserved: int = 1 << 34) -> HandMadeTrace:
    """Steps that each allocate 4 MiB and free it, plus ``growth[i]`` bytes kept in step i."""
    t = HandMadeTrace()
    allocated = 0
    addr = 0x1000

    def event(ts: float, nbytes: int, at: int) -> None:
        nonlocal allocated
        allocated += nbytes
        t.events.append({
            "ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": TIMELINE_HOST_PID,
            "tid": TIMELINE_MAIN_TID, "ts": ts,
            "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": nbytes, "Addr": at, "Device Id": 0, "Device Type": 1},
        })

    for i, kept in enumerate(growth):
        ts = i * 1_000.0
        t.step(i + 1, ts, 1_000)
        t.host("aten::mm", ts + 10, 100)
        t.gpu(CONV, ts + 20, 500, launch_ts=ts + 12)
        event(ts + 15, 4 * MiB, 0x10)
        if kept:
            addr += 0x100
            event(ts + 16, kept, addr)
        event(ts + 600, -4 * MiB, 0x10)
    return t


def test_memory_growth_edges(tmp_path: Path) -> None:
    f = by_id(findings(write_h200(memory_trace([0, 8 * MiB, 8 * MiB, 8 * MiB, 8 * MiB]), tmp_path / "g.json")), "memory_growth")
    assert f is not None and dict(f.evidence.figures)["growth_per_step_bytes"] == 8 * MiB
    assert f.evidence.ops[0].name.startswith("aten::mm") and f.confidence == "high"
    # Flat memory, growth that stopped, growth over too few steps: none.
    for growth in ([0] * 5, [0, 8 * MiB, 8 * MiB, 8 * MiB, 0], [0, 0, 0, 0, 8 * MiB]):
        r = findings(write_h200(memory_trace(growth), tmp_path / "n.json"))
        assert "memory_growth" not in ids(r, material_only=False), growth


def test_memory_pressure_advice_fits_the_workload(tmp_path: Path) -> None:
    full = 140 * 2**30  # of the H200's 143 GiB
    f = by_id(findings(write_h200(memory_trace([0] * 3, reserved=full), tmp_path / "i.json")), "memory_pressure")
    assert f is not None and "KV cache" in f.fix and "gradient accumulation" not in f.fix
    assert saving_text(f, findings(write_h200(memory_trace([0] * 3, reserved=full), tmp_path / "i.json"))).startswith("no time saving claimed; peak reserved")
    t = memory_trace([0] * 3, reserved=full)
    t.host("MmBackward0", 1, 2)
    f = by_id(findings(write_h200(t, tmp_path / "t.json")), "memory_pressure")
    assert f is not None and "gradient accumulation" in f.fix
    # A serving engine reserves most of the device for its KV cache by design: no risk.
    t = memory_trace([0] * 3, reserved=full)
    t.host("vllm/v1/worker/gpu_model_runner.py(1784): execute_model", 1, 2, cat="python_function")
    assert "memory_pressure" not in ids(findings(write_h200(t, tmp_path / "v.json")), material_only=False)


def test_shrink_host_windows_touches_only_its_windows(tmp_path: Path) -> None:
    import pytest

    from traceinsight.analysis.whatif.host_windows import ShrinkHostWindows
    from traceinsight.analysis.whatif.transforms import TransformError

    trace = write_h200(prep_trace(), tmp_path / "w.json")
    assert whatif(trace, (ShrinkHostWindows((), 0.0),)).saving_ns == 0
    # A window on another thread changes nothing.
    est = detect_host_preprocessing(context(trace))
    assert est is not None
    (windows,) = [t.windows for t in est.transforms if isinstance(t, ShrinkHostWindows)]
    elsewhere = tuple((pid, tid + 1, a, b) for pid, tid, a, b in windows)
    assert whatif(trace, (ShrinkHostWindows(elsewhere, 0.0),)).saving_ns == 0
    # About 1 ms of each step's ~2.1 ms device time (its idle before the copy) goes.
    assert 40.0 <= whatif(trace, est.transforms).saving_pct <= 55.0
    with pytest.raises(TransformError):
        whatif(trace, (ShrinkHostWindows(windows, -1.0),))
