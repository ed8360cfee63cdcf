"""Shared test set-up: an isolated cache directory and access to the bundled sample traces."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

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


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Tests must never read or write the user's real cache.
    mp = pytest.MonkeyPatch()
    mp.setenv("TRACEINSIGHT_CACHE_DIR", str(tmp_path_factory.mktemp("ti-cache")))
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
