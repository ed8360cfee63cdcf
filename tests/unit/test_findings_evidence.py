"""What a finding shows as evidence and in its title when there are more culprits than it
lists: the largest first (ties by name), five of them, all counted in the saving. Hand-made
traces (written by hand, not recorded); times in µs, like Kineto's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.findings_helpers import by_id, findings, write_h200
from tests.handmade import HandMadeTrace
from tests.unit.test_findings_handmade import memcpy_trace, sync_trace

ADD = "void at::native::vectorized_elementwise_kernel<4, add>"
# (host op or region, idle µs): seven culprits, two tied at 80 µs.
CULPRITS = [
    ("op_a", 50.0),
    ("op_b", 80.0),
    ("op_c", 80.0),
    ("op_d", 30.0),
    ("op_e", 60.0),
    ("op_f", 20.0),
    ("op_g", 40.0),
]
TOP5 = ["op_b", "op_c", "op_e", "op_a", "op_g"]


def launch_gaps_trace(culprits: list[tuple[str, float]]) -> HandMadeTrace:
    """Hand-made: 100 µs kernels; before each one but the first, the GPU idles while the host,
    inside the named op, is still in the launch call of the next kernel (launch overhead)."""
    t = HandMadeTrace()
    t.step(1, 0, 1)
    t.host("aten::mul", 1, 3)
    t.gpu(ADD, 10, 100, launch_ts=2)
    ts = 110.0
    for name, idle in culprits:
        t.host(name, ts - 2, idle + 4)
        t.gpu(ADD, ts + idle, 100, launch_ts=ts - 1, launch_dur=idle - 1)
        ts += idle + 100
    t.events[0]["dur"] = ts + 10
    return t


def host_gaps_trace(culprits: list[tuple[str, float]]) -> HandMadeTrace:
    """Hand-made: 100 µs kernels; before each one but the first, the GPU idles while the host
    works in the named region (no launches), then launches the next kernel."""
    t = HandMadeTrace()
    t.step(1, 0, 1)
    t.host("aten::mul", 1, 3)
    t.gpu(ADD, 10, 100, launch_ts=2)
    ts = 110.0
    for name, idle in culprits:
        t.host(name, ts + 1, idle - 8, cat="user_annotation")
        t.host("aten::add", ts + idle - 6, 4)
        t.gpu(ADD, ts + idle, 100, launch_ts=ts + idle - 5, launch_dur=2)
        ts += idle + 100
    t.events[0]["dur"] = ts + 10
    return t


def test_launch_bound_lists_the_five_largest_culprits(tmp_path: Path) -> None:
    result = findings(write_h200(launch_gaps_trace(CULPRITS), tmp_path / "l.json"))
    f = by_id(result, "launch_bound")
    assert f is not None and f.material
    assert f.saving_window_ns == 360_000  # every gap, listed or not
    assert f.confidence == "high"  # every kernel after the first waited for its launch
    assert [o.name for o in f.evidence.ops] == TOP5
    assert [o.dur_ns for o in f.evidence.ops] == [80_000, 80_000, 60_000, 50_000, 40_000]
    assert f.evidence.kernels == ()  # no kernel ran shorter than its launch


def test_launch_bound_leaves_out_torch_compile_internals(tmp_path: Path) -> None:
    culprits = [("TorchDynamo Cache Lookup" if n == "op_b" else n, i) for n, i in CULPRITS]
    result = findings(write_h200(launch_gaps_trace(culprits), tmp_path / "l.json"))
    f = by_id(result, "launch_bound")
    assert f is not None
    assert f.saving_window_ns == 280_000
    assert [o.name for o in f.evidence.ops] == ["op_c", "op_e", "op_a", "op_g", "op_d"]


def test_launch_bound_lists_the_short_kernels(tmp_path: Path) -> None:
    # Hand-made: 40 kernels of 3 µs (shorter than their 5 µs launches) and 60 of 50 µs.
    t = HandMadeTrace()
    t.step(1, 0, 1)
    ts = 10.0
    for i in range(100):
        short = i % 5 < 2
        t.host("aten::mul", ts - 8, 7)
        t.gpu("short_kernel" if short else ADD, ts, 3.0 if short else 50.0, launch_ts=ts - 7, launch_dur=5.0)
        ts += (3.0 if short else 50.0) + 5.0
    t.events[0]["dur"] = ts
    f = by_id(findings(write_h200(t, tmp_path / "short.json")), "launch_bound")
    # Every launch returns 3 µs after the previous kernel ended: the GPU waited for 99 of them.
    assert f is not None and f.confidence == "high"
    assert [(k.name, k.calls) for k in f.evidence.kernels] == [("short_kernel", 40)]
    assert f.confidence_reason == (
        "99 of 100 kernels (99 %) were launched after the GPU had run out of work; "
        "40 % of kernels run shorter than their launch call "
        "(mean launch 5.0 µs, median kernel 50.0 µs)"
    )


def test_host_sync_lists_the_sync_ops_most_called_first(tmp_path: Path) -> None:
    # Hand-made (sync_trace of test_findings_handmade): one .item() blocking in
    # cudaStreamSynchronize, plus two aten::nonzero calls earlier in the step.
    t = sync_trace(500.0)
    t.host("aten::nonzero", 100, 5)
    t.host("aten::nonzero", 200, 5)
    f = by_id(findings(write_h200(t, tmp_path / "sync.json")), "host_sync")
    assert f is not None and f.confidence == "high"
    assert [(o.name, o.calls) for o in f.evidence.ops][:3] == [
        ("aten::nonzero", 2),
        ("aten::_local_scalar_dense", 1),
        ("aten::item", 1),
    ]


@pytest.mark.parametrize("n", [7, 1])
def test_host_bound_names_the_largest_region_and_lists_five(tmp_path: Path, n: int) -> None:
    result = findings(write_h200(host_gaps_trace(CULPRITS[:n]), tmp_path / "h.json"))
    f = by_id(result, "host_bound")
    assert f is not None and f.confidence == "low"
    top = "op_b" if n == 7 else "op_a"
    assert f.title == f"The GPU waits while the host works in {top}"
    total = sum(i for _, i in CULPRITS[:n]) * 1_000
    assert dict(f.evidence.figures)["host_idle_ns"] == total
    assert [r.name for r in f.evidence.regions] == (TOP5 if n == 7 else ["op_a"])


def test_cpu_tensor_creation_counts_per_step(tmp_path: Path) -> None:
    # Hand-made (memcpy_trace of test_findings_handmade): 4 steps, each building a tensor on
    # the CPU (aten::randn) and copying it to the GPU with two 4 MiB aten::to copies.
    t = memcpy_trace(
        "Memcpy HtoD (Pageable -> Device)", 4 << 20, 400.0, top_op="aten::to", per_step=2, steps=4, lead_us=300.0
    )
    for step in (e for e in list(t.events) if e["name"].startswith("ProfilerStep#")):
        t.host("aten::randn", step["ts"] + 1, 290)
    f = by_id(findings(write_h200(t, tmp_path / "cpu.json")), "cpu_tensor_creation")
    assert f is not None and f.confidence == "medium"
    figures = dict(f.evidence.figures)
    assert (figures["cpu_tensors_per_step"], figures["copies_per_step"]) == (1.0, 2.0)
    assert figures["copy_bytes"] == 8 * (4 << 20)
    assert f.confidence_reason == "1 tensors made on the CPU and 2 host-to-device copies per step"
    assert [(o.name, o.calls) for o in f.evidence.ops] == [("aten::randn", 4), ("aten::to", 8)]


def test_cpu_tensor_creation_in_a_single_step(tmp_path: Path) -> None:
    # One step, one tensor built on the CPU and copied once: one per step is the habit.
    t = memcpy_trace("Memcpy HtoD (Pageable -> Device)", 4 << 20, 400.0, top_op="aten::to", steps=1, lead_us=300.0)
    for step in (e for e in list(t.events) if e["name"].startswith("ProfilerStep#")):
        t.host("aten::randn", step["ts"] + 1, 290)
    f = by_id(findings(write_h200(t, tmp_path / "cpu1.json")), "cpu_tensor_creation")
    assert f is not None
    figures = dict(f.evidence.figures)
    assert (figures["cpu_tensors_per_step"], figures["copies_per_step"]) == (1.0, 1.0)
