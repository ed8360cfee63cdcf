"""profile(): a tiny CPU model, with NVML faked at the module boundary."""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import pytest
from fake_pynvml import NVML_ERROR_LIBRARY_NOT_FOUND, install

from traceinsight.capture import counters as C
from traceinsight.capture import current_profiler, profile
from traceinsight.capture.merge import read_trace
from traceinsight.errors import CaptureError

torch = pytest.importorskip("torch")


def train(prof: object | None, steps: int) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(16, 32)).sum().backward()
        opt.step()
        if prof is not None:
            prof.step()  # type: ignore[attr-defined]


def events(path: Path) -> list[dict]:
    return read_trace(path)["traceEvents"]


def wall_ns(trace: dict, ts_us: float) -> float:
    return trace["baseTimeNanoseconds"] + ts_us * 1000


def test_trace_has_steps_counters_and_meta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, util_gpu=88)
    out = tmp_path / "run.json.gz"
    with profile(out, schedule=dict(wait=1, warmup=1, active=3), devices=[0], interval_s=0.02) as p:
        assert current_profiler() is p
        for _ in range(5):
            train(None, 1)
            time.sleep(0.05)  # long enough for several samples inside the active window
            p.step()
    assert current_profiler() is None
    assert p.paths == [out]
    trace = read_trace(out)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"} <= names
    counters = [e for e in trace["traceEvents"] if e.get("ph") == "C"]
    assert {c["name"] for c in counters} >= {C.NVML_UTILIZATION, C.NVML_POWER, C.NVML_CLOCKS}
    assert all(c["pid"] == 0 and isinstance(c["ts"], float) for c in counters)
    assert all(c["args"] for c in counters)
    util = [c for c in counters if c["name"] == C.NVML_UTILIZATION]
    assert len(util) >= 3 and all(c["args"][C.GPU_PCT] == 88 for c in util)
    cap = trace[C.TRACE_META_KEY]["capture"]
    assert cap["nvml"] == "ok" and cap["gpm"] == "ok"
    assert cap["devices"] == [{"index": 0, "name": "Fake H100", "uuid": "GPU-fake-0"}]
    assert cap["schedule"]["active"] == 3 and cap["options"]["record_shapes"] is True
    assert cap["interval_s"] == 0.02 and cap["n_samples"] == len(util)


def test_counters_land_inside_the_span_they_were_sampled_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = iter(range(10_000))
    fake = install(monkeypatch, call_latency_s=0.002, util_gpu=lambda _t: next(counter))
    out = tmp_path / "a.json.gz"
    with profile(out, devices=[0], interval_s=0.02):
        time.sleep(0.25)
        train(None, 2)
    trace = read_trace(out)
    calls = {c.result.gpu: c for c in fake.calls_named("util")}
    util = [e for e in trace["traceEvents"] if e.get("name") == C.NVML_UTILIZATION]
    assert len(util) >= 5
    for ev in util:
        call = calls[ev["args"][C.GPU_PCT]]
        # ts is µs with 3 decimals: allow the 0.5 ns rounding.
        assert call.start_ns - 1 <= wall_ns(trace, ev["ts"]) <= call.end_ns + 1


def test_trace_is_written_when_the_code_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch)
    out = tmp_path / "crash.json.gz"
    with pytest.raises(ZeroDivisionError), profile(out, devices=[0]):
        train(None, 1)
        _ = 1 / 0
    names = {e.get("name") for e in events(out)}
    assert "aten::linear" in names


def test_trace_is_written_when_raising_mid_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch)
    out = tmp_path / "mid.json.gz"
    sched = dict(wait=0, warmup=1, active=5)
    with pytest.raises(RuntimeError, match="boom"), profile(out, schedule=sched, devices=[0]) as p:
        train(p, 3)
        raise RuntimeError("boom")
    assert "ProfilerStep#1" in {e.get("name") for e in events(out)}


def test_no_nvml_still_writes_trace_and_records_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    out = tmp_path / "plain.json.gz"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with profile(out, devices=[0]):
            train(None, 1)
    trace = read_trace(out)
    assert not [e for e in trace["traceEvents"] if e.get("ph") == "C"]
    assert "not installed" in trace[C.TRACE_META_KEY]["capture"]["nvml"]
    assert len([m for m in w if "traceinsight" in str(m.message)]) == 1


def test_nvml_init_error_still_writes_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    out = tmp_path / "noinit.json.gz"
    with pytest.warns(RuntimeWarning), profile(out, devices=[0]):
        train(None, 1)
    cap = read_trace(out)[C.TRACE_META_KEY]["capture"]
    assert cap["nvml"].startswith("NVML init failed") and cap["n_samples"] == 0


def test_repeat_writes_one_file_per_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    out = tmp_path / "cyc.json.gz"
    with profile(out, schedule=dict(wait=0, warmup=1, active=1, repeat=2), nvml=False) as p:
        train(p, 5)
    assert [x.name for x in p.paths] == ["cyc.cycle1.json.gz", "cyc.cycle2.json.gz"]
    assert "ProfilerStep#1" in {e.get("name") for e in events(p.paths[0])}
    assert "ProfilerStep#3" in {e.get("name") for e in events(p.paths[1])}


def test_decorator_and_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    out = tmp_path / "deco.json"

    @profile(out, with_stack=True, profile_memory=True, nvml=False)
    def work() -> int:
        train(None, 1)
        return 7

    assert work() == 7
    trace = read_trace(out)
    cap = trace[C.TRACE_META_KEY]["capture"]
    assert cap["options"]["with_stack"] and cap["options"]["profile_memory"]
    assert cap["nvml"] == "disabled"
    assert any(e.get("cat") == "python_function" for e in trace["traceEvents"])


def test_write_failure_is_a_capture_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch)
    from traceinsight.capture import profiler

    def fail(*a: object, **k: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(profiler, "write_trace_atomic", fail)
    with (
        pytest.raises(CaptureError, match="read-only"),
        profile(tmp_path / "x.json.gz", nvml=False),
    ):
        train(None, 1)


def test_bad_schedule_is_a_capture_error() -> None:
    with pytest.raises(CaptureError):
        profile("x.json.gz", schedule=dict(wait=0, warmup=0, active=0))
