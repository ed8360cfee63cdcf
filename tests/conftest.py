"""Shared test set-up: an isolated cache directory and access to the bundled sample traces."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.analyses import ENV_DIR as ANALYSES_DIR

# No property test is timed: a per-example deadline only measures how busy the machine is.
# CI runs them with fixed examples so that a red build always reproduces; locally they draw
# new examples each run and keep exploring.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES_DIR = ROOT / "sample_traces"


def sample_names() -> list[str]:
    """Stems of every bundled sample trace (``train_eager``, ``gemm_bf16``, ...)."""
    return sorted(p.name.removesuffix(".json.gz") for p in SAMPLES_DIR.glob("*.json.gz"))


def sample_path(name: str) -> Path:
    """Path of a bundled sample trace; a missing one is a broken checkout, so it fails."""
    path = SAMPLES_DIR / f"{name}.json.gz"
    if not path.exists():
        pytest.fail(f"sample trace {path} is missing from the checkout")
    return path


@functools.cache
def _load_sample(name: str):  # type: ignore[no-untyped-def]
    from traceinsight.trace.loader import load

    return load(sample_path(name), cache=False)


RUN_DIR = "TRACEINSIGHT_TEST_RUN_DIR"


def pytest_configure(config: pytest.Config) -> None:
    # One directory for the whole run, made by the controlling process before the workers
    # start (they inherit the environment): the trace cache and the shared analyses
    # (tests/analyses.py) of every worker live there, so a trace is parsed and analysed once
    # per run, not once per worker.
    if hasattr(config, "workerinput") or os.environ.get(RUN_DIR):
        return
    run_dir = Path(tempfile.mkdtemp(prefix="traceinsight-tests-"))
    (run_dir / "analyses").mkdir()
    os.environ[RUN_DIR] = str(run_dir)
    os.environ[ANALYSES_DIR] = str(run_dir / "analyses")
    config.add_cleanup(lambda: _remove_run_dir(run_dir))


def _remove_run_dir(run_dir: Path) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)
    os.environ.pop(RUN_DIR, None)
    os.environ.pop(ANALYSES_DIR, None)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Tests must never read or write the user's real cache; the workers of a run share one.
    mp = pytest.MonkeyPatch()
    run_dir = os.environ.get(RUN_DIR)
    cache_dir = Path(run_dir) / "trace-cache" if run_dir else tmp_path_factory.mktemp("ti-cache")
    mp.setenv("TRACEINSIGHT_CACHE_DIR", str(cache_dir))
    yield
    mp.undo()


@pytest.fixture
def sample_trace() -> Callable[[str], object]:
    """``sample_trace("train_eager")`` → a loaded :class:`Trace`, loaded once per session."""
    return _load_sample


@pytest.fixture
def disk_fails_half_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every atomic write (``traceinsight.atomic``) writes half its text to the temporary
    file, then fails with OSError("disk full")."""
    from traceinsight import atomic

    real_fdopen = os.fdopen

    class Broken:
        def __init__(self, fd: int, mode: str) -> None:
            self.f = real_fdopen(fd, mode)

        def __enter__(self) -> Broken:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, data: bytes) -> None:
            self.f.write(data[: len(data) // 2])
            raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "fdopen", Broken)
