"""The engines: faults stay with their rank; the pool and Ray give the serial result."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from traceinsight.engine import EngineError, run_per_rank
from traceinsight.engine.job import load_job


def _square_or_die(x: int) -> int:
    if x == 2:
        os._exit(3)  # the worker process dies, as on a segfault or the OOM killer
    return x * x


def _square_or_hang(x: int) -> int:
    if x == 1:
        time.sleep(60)
    return x * x


def _square_or_raise(x: int) -> int:
    if x == 0:
        raise ValueError("bad rank\nsecond line")
    return x * x


def test_a_dead_worker_loses_only_its_rank() -> None:
    out = run_per_rank(list(range(5)), _square_or_die, engine="local", jobs=2)
    assert [o.value for o in out] == [0, 1, None, 9, 16]
    assert out[2].error == "the worker process died while analysing this rank"


def test_a_hung_rank_times_out() -> None:
    out = run_per_rank([0, 1], _square_or_hang, engine="local", jobs=2, timeout_s=12)
    assert out[0].value == 0
    assert out[1].error is not None and "timed out" in out[1].error


@pytest.mark.parametrize("engine", ["serial", "local"])
def test_errors_are_one_line(engine: str) -> None:
    out = run_per_rank([0, 1], _square_or_raise, engine=engine, jobs=2)
    assert out[0].error == "ValueError: bad rank" and out[1].value == 1


def test_bad_engine_settings() -> None:
    with pytest.raises(EngineError, match="unknown engine"):
        run_per_rank([1], _square_or_raise, engine="dask")
    with pytest.raises(EngineError, match="at least 1"):
        run_per_rank([1], _square_or_raise, jobs=0)


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(EngineError, match=r"traceinsight\[ray\]") as info:
        run_per_rank([1], _square_or_raise, engine="ray")
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def ray_local():  # type: ignore[no-untyped-def]
    # The nox "ray" session installs the extra and sets TRACEINSIGHT_REQUIRE_RAY: there a
    # missing Ray fails instead of skipping.
    if os.environ.get("TRACEINSIGHT_REQUIRE_RAY"):
        import ray
    else:
        ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}})
    yield ray
    ray.shutdown()


def test_ray_matches_the_pool(ray_local: object) -> None:
    ddp = sorted(str(p) for p in (Path(__file__).resolve().parents[2] / "sample_traces").glob("ddp_train.rank*.json.gz"))
    pooled = load_job(ddp, engine="local", jobs=2)
    on_ray = load_job(ddp, engine="ray")
    assert on_ray.ranks == pooled.ranks == [0, 1] and not on_ray.failed
    assert on_ray.analyze().to_dict() == pooled.analyze().to_dict()


def test_ray_task_errors_stay_with_their_rank(ray_local: object) -> None:
    out = run_per_rank([0, 1, 2], _square_or_raise, engine="ray")
    assert out[0].error == "ValueError: bad rank"
    assert [o.value for o in out[1:]] == [1, 4]


def test_ray_gives_the_pool_result_on_the_gloo_job(ray_local: object) -> None:
    files = str(Path(__file__).resolve().parents[2] / "sample_traces" / "job_straggler.rank*.json.gz")
    pooled = load_job(files, engine="local", jobs=2).analyze()
    on_ray = load_job(files, engine="ray").analyze()
    assert on_ray.stragglers.straggler == 2 and on_ray.stragglers.reason == "data_loading"
    assert on_ray.to_dict() == pooled.to_dict()
