"""Steps: host vs device spans, the device-step split, stats, outliers and warm-up."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.conftest import sample_names
from tests.handmade import HandMadeTrace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.sections import steps
from traceinsight.trace.loader import load

CFG = AnalysisConfig()
PART_COLS = [f"{p}_ns" for p in (*steps.PARTS, steps.OTHER)]


def run_ahead(tmp_path: Path, kernel_us: list[float]) -> steps.StepsResult:
    """Hand-made: 100 µs host steps each launching one kernel; the GPU runs behind the CPU."""
    t = HandMadeTrace()
    gpu_free = 0.0
    for i, kdur in enumerate(kernel_us):
        start = 100.0 * i
        t.step(i, start, 100)
        t.host("aten::mm", start + 10, 20)
        launch = start + 15
        kstart = max(gpu_free, launch + 5)
        t.gpu("gemm", kstart, kdur, launch_ts=launch)
        gpu_free = kstart + kdur
    return steps.run(load(t.write(tmp_path / "steps.json"), cache=False), CFG)


def test_device_steps_follow_the_gpu_not_the_host(tmp_path: Path) -> None:
    result = run_ahead(tmp_path, [150, 150, 150])
    frame = result.steps
    assert frame["host_dur_ns"].to_list() == [100_000] * 3
    # Step 0: host start 0 → kernel end 170; step 1 starts when step 0's work ends (170), etc.
    assert frame["device_start_ns"].to_list() == [0, 170_000, 320_000]
    assert frame["device_end_ns"].to_list() == [170_000, 320_000, 470_000]
    assert frame["kernel_ns"].to_list() == [150_000] * 3
    # Device steps tile the device timeline.
    assert (frame["device_start_ns"][1:] == frame["device_end_ns"][:-1]).all()


def test_parts_sum_to_the_device_step_by_priority(tmp_path: Path) -> None:
    result = run_ahead(tmp_path, [50, 50, 50])
    frame = result.steps
    total = frame.select(pl.sum_horizontal(PART_COLS).alias("t"))["t"]
    assert (total == frame["device_dur_ns"]).all()
    first = frame.row(0, named=True)
    # Device step 0..100 µs (the host's step ends after its kernel: the step is the loop's
    # period): aten::mm 10..30 holding its launch call 15..17; kernel 20..70.
    # kernel 20..70; runtime 15..17; CPU exec = the op minus both (10..15, 17..20); other 0..10
    # and 70..100.
    assert first["device_dur_ns"] == 100_000
    assert (first["kernel_ns"], first["runtime_ns"], first["cpu_exec_ns"], first["other_ns"]) == (
        50_000,
        2_000,
        8_000,
        40_000,
    )


def test_warmup_and_outliers(tmp_path: Path) -> None:
    result = run_ahead(tmp_path, [400, 50, 52, 49, 51, 50, 150, 50])
    frame = result.steps
    assert result.warmup_step == 0
    assert frame["is_warmup"].to_list() == [True] + [False] * 7
    assert result.outlier_steps == (6,)
    assert frame.filter(pl.col("is_outlier"))["step"].to_list() == [6]
    stats = {row["metric"]: row for row in result.stats.iter_rows(named=True)}
    assert stats["device_dur_ns"]["steps"] == 8
    assert stats["device_dur_ns_no_warmup"]["steps"] == 7
    assert stats["device_dur_ns"]["max_ns"] == frame["device_dur_ns"].max()
    assert stats["device_dur_ns"]["cv"] > stats["device_dur_ns_no_warmup"]["cv"]


def test_steady_steps_have_no_outliers(tmp_path: Path) -> None:
    result = run_ahead(tmp_path, [50, 51, 49, 50, 50, 52])
    assert result.warmup_step is None
    assert result.outlier_steps == ()


def test_frame_contract(tmp_path: Path) -> None:
    frame = run_ahead(tmp_path, [50, 50]).steps
    assert list(frame.columns) == list(steps.STEP_SCHEMA)
    for col, dtype in steps.STEP_SCHEMA.items():
        assert frame.schema[col] == dtype, col


def test_no_steps_is_not_available(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.host("aten::mm", 0, 20)
    t.gpu("gemm", 10, 5, launch_ts=2)
    result = steps.run(load(t.write(tmp_path / "nosteps.json"), cache=False), CFG)
    assert not result.available
    assert "ProfilerStep" in (result.reason or "")
    assert result.to_dict()["steps"] == []


@pytest.mark.parametrize("name", sample_names())
def test_samples_parts_add_up(name: str, sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = steps.run(sample_trace(name), CFG)
    if not result.available:
        return
    frame = result.steps
    assert (frame.select(pl.sum_horizontal(PART_COLS).alias("t"))["t"] == frame["device_dur_ns"]).all()
    assert (frame.select(pl.min_horizontal(PART_COLS).alias("m"))["m"] >= 0).all()
    assert (frame["device_start_ns"] >= frame["host_start_ns"]).all()
    assert (frame["device_start_ns"][1:] >= frame["device_end_ns"][:-1]).all()


def test_gemm_bf16_steady_steps_are_kernel_bound(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = steps.run(sample_trace("gemm_bf16"), CFG)
    steady = result.steps.filter(~pl.col("is_warmup"))
    share = float(steady["kernel_ns"].sum()) / float(steady["device_dur_ns"].sum())
    assert share > 0.9
    # The GPU, not the host, sets the pace: device steps are far longer than host steps.
    assert float(steady["device_dur_ns"].median()) > 5 * float(steady["host_dur_ns"].min())  # type: ignore[arg-type]


def test_dataloader_steps_are_dominated_by_data_loading(sample_trace) -> None:  # type: ignore[no-untyped-def]
    frame = steps.run(sample_trace("dataloader_w0"), CFG).steps
    assert (frame["dataloader_ns"] > 0.5 * frame["device_dur_ns"]).all()


def test_train_eager_first_step_is_warmup(sample_trace) -> None:  # type: ignore[no-untyped-def]
    result = steps.run(sample_trace("train_eager"), CFG)
    first = int(result.steps["step"][0])
    assert result.warmup_step == first


# -- the outlier limit, exactly at its parts ---------------------------------------------------


def test_slow_limit_is_median_plus_three_robust_sigmas() -> None:
    # median 100, absolute deviations 0 5 5 10 10: MAD 5, sigma 1.4826 × 5; 3 sigma = 22.239
    limit = steps._slow_limit(pl.Series([100.0, 105.0, 95.0, 110.0, 90.0]))
    assert limit == pytest.approx(100 + 3 * 1.4826 * 5, abs=1e-9)


def test_slow_limit_is_at_least_ten_percent_above_the_median() -> None:
    # MAD 0: the floor of 10 % of the median holds
    assert steps._slow_limit(pl.Series([100.0, 100.0, 100.0, 100.0, 200.0])) == pytest.approx(110.0)


def test_slow_limit_is_capped_at_one_and_a_half_medians() -> None:
    # MAD 20: 3 sigma = 88.956 would put the limit at 189; the cap is 150
    assert steps._slow_limit(pl.Series([100.0, 120.0, 80.0, 130.0, 70.0])) == pytest.approx(150.0)


@pytest.mark.parametrize(("first_ns", "warm"), [(110, False), (111, True)])
def test_with_two_steps_the_first_is_warmup_above_ten_percent_over_the_second(first_ns: int, warm: bool) -> None:
    flagged = steps._flags(pl.DataFrame({"step": [1, 2], "device_dur_ns": [first_ns, 100]}))
    assert flagged["is_warmup"].to_list() == [warm, False]
    assert not flagged["is_outlier"].any()  # two steps are too few to call one an outlier


def test_step_stats_coefficient_of_variation_and_an_all_warmup_window() -> None:
    frame = pl.DataFrame({"device_dur_ns": [90, 110], "host_dur_ns": [100, 100], "is_warmup": [False, False]})
    stats = steps._stats(frame)
    cv = dict(zip(stats["metric"].to_list(), stats["cv"].to_list(), strict=True))
    assert cv["device_dur_ns"] == pytest.approx(0.1)  # std 10 (ddof 0) over mean 100
    assert cv["host_dur_ns"] == 0.0
    # every step a warm-up: no steady-state row, and no error
    only = steps._stats(pl.DataFrame({"device_dur_ns": [300], "host_dur_ns": [300], "is_warmup": [True]}))
    assert only["metric"].to_list() == ["device_dur_ns", "host_dur_ns"]
