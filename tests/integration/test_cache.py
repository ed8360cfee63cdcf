"""The Parquet cache: written on first load, trusted only while valid, never required."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight.trace import cache


@pytest.fixture
def trace_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path / "cache"))
    target = tmp_path / "trace.json.gz"
    shutil.copy(sample_path("train_eager"), target)
    return target


def test_second_load_comes_from_the_cache_and_is_identical(trace_copy: Path) -> None:
    first = ti.load(trace_copy)
    assert not first.meta.from_cache
    assert cache.entry_dir(trace_copy).is_dir()
    second = ti.load(trace_copy)
    assert second.meta.from_cache
    for name in ("events", "kernels", "counters", "memory"):
        assert second.frame(name).equals(first.frame(name)), name
    assert second.meta.devices == first.meta.devices
    assert second.meta.warnings == first.meta.warnings


def test_a_cached_trace_keeps_the_path_as_given_this_time(
    trace_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one entry serves every spelling of the path; the report names the one the user typed
    ti.load(trace_copy.resolve())
    monkeypatch.chdir(trace_copy.parent)
    again = ti.load(Path(trace_copy.name))
    assert again.meta.from_cache
    assert again.meta.path == trace_copy.name


def test_cache_false_neither_reads_nor_writes(trace_copy: Path) -> None:
    trace = ti.load(trace_copy, cache=False)
    assert not trace.meta.from_cache
    assert not cache.entry_dir(trace_copy).exists()


def test_a_changed_file_gets_a_new_entry(trace_copy: Path) -> None:
    ti.load(trace_copy)
    old_key = cache.cache_key(trace_copy)
    shutil.copy(sample_path("tiny_kernels"), trace_copy)
    os.utime(trace_copy, ns=(1, 1))
    assert cache.cache_key(trace_copy) != old_key
    fresh = ti.load(trace_copy)
    assert not fresh.meta.from_cache
    assert fresh.kernels.height == ti.load(sample_path("tiny_kernels"), cache=False).kernels.height


@pytest.mark.parametrize("damage", ["truncate_parquet", "garbage_meta", "missing_frame"])
def test_a_corrupt_entry_is_rebuilt_not_trusted(trace_copy: Path, damage: str) -> None:
    original = ti.load(trace_copy)
    entry = cache.entry_dir(trace_copy)
    if damage == "truncate_parquet":
        path = entry / "events.parquet"
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage_meta":
        (entry / "meta.json").write_text("{not json")
    else:
        (entry / "kernels.parquet").unlink()
    reloaded = ti.load(trace_copy)
    assert not reloaded.meta.from_cache
    assert reloaded.events.equals(original.events)
    assert ti.load(trace_copy).meta.from_cache  # rebuilt entry is good again


def test_unwritable_cache_dir_still_loads(trace_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(blocker / "sub"))
    assert ti.load(trace_copy).events.height > 0


def test_cli_no_cache_flag(trace_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traceinsight.cli.app import main

    assert main(["analyze", "--no-cache", "--only", "overview", str(trace_copy)]) == 0
    assert not cache.entry_dir(trace_copy).exists()
    assert main(["analyze", "--only", "overview", str(trace_copy)]) == 0
    assert cache.entry_dir(trace_copy).exists()
