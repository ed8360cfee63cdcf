"""The front door's one rule (``trace/inputs.py``): what a path, a glob, a directory, a URL or
a list names, as analyze, the API, the job discovery and compare's runs all read it."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceinsight.trace.discover import expand
from traceinsight.trace.inputs import is_single_trace, names_many, shape_of


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("a.rank0.json.gz", "a.rank1.json.gz", "fit-[Strategy]DDP.json", "notes.txt"):
        (tmp_path / name).write_bytes(b"{}")
    return tmp_path


def test_each_shape(folder: Path) -> None:
    assert shape_of(str(folder / "a.rank0.json.gz")) == "file"
    assert shape_of(str(folder / "missing.json")) == "file"  # reading it says it is missing
    assert shape_of(str(folder)) == "directory"
    assert shape_of(str(folder / "a.rank*.json.gz")) == "pattern"
    # An existing name is a path even with glob characters in it (Lightning's trace names).
    assert shape_of(str(folder / "fit-[Strategy]DDP.json")) == "file"
    assert shape_of("s3://bucket/run.json.gz") == "url"
    assert shape_of("s3://bucket/run.rank*.json.gz") == "pattern"
    assert shape_of([str(folder / "a.rank0.json.gz")]) == "file"  # a list of one is that one
    assert shape_of([str(folder / "a.rank0.json.gz"), str(folder / "a.rank1.json.gz")]) == "files"


def test_every_entry_reads_the_same_rule(folder: Path) -> None:
    pattern = str(folder / "a.rank*.json.gz")
    assert names_many(pattern) and names_many(str(folder))
    assert not names_many(str(folder / "a.rank0.json.gz")) and not names_many("s3://b/x.json")
    # The job discovery expands exactly what the rule calls a pattern or a directory.
    assert [Path(p).name for p in expand(pattern)] == ["a.rank0.json.gz", "a.rank1.json.gz"]
    assert [Path(p).name for p in expand(str(folder))] == ["a.rank0.json.gz", "a.rank1.json.gz", "fit-[Strategy]DDP.json"]
    assert expand(str(folder / "fit-[Strategy]DDP.json")) == [str(folder / "fit-[Strategy]DDP.json")]
    # A run of compare: one trace file or a URL; a directory or a glob is a job.
    assert is_single_trace(str(folder / "a.rank0.json.gz")) and is_single_trace("gs://b/x.json")
    assert not is_single_trace(str(folder)) and not is_single_trace(pattern)
    assert not is_single_trace(str(folder / "notes.txt"))  # not a trace's name: discovered as a job
