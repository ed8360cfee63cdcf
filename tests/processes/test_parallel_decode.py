"""Decoding a big plain trace on several processes gives exactly what one process gives."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from tests.handmade import op, write_trace
from traceinsight.trace import chunking, parallel, source

pytestmark = pytest.mark.skipif(parallel.fcntl is None, reason="decode helpers need fcntl")


def _plain_copy(tmp_path: Path, name: str, *, indent: int | None = None) -> Path:
    """A real sample written as plain JSON (helpers map the file; they skip gzip)."""
    doc = json.loads(gzip.decompress(sample_path(name).read_bytes()))
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc, indent=indent))
    return path


def _assert_same(a: Any, b: Any) -> None:
    assert a.events.equals(b.events)
    assert a.kernels.equals(b.kernels)
    assert a.counters.equals(b.counters)
    assert a.memory.equals(b.memory)
    assert a.meta.warnings == b.meta.warnings
    assert a.meta.phase_counts == b.meta.phase_counts
    assert a.meta.process_names == b.meta.process_names
    assert a.meta.thread_names == b.meta.thread_names
    assert a.meta.pid_labels == b.meta.pid_labels


def _slow_parent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the loading process decode slowly, so that helpers surely take some pieces; the
    list it returns fills with the sizes of the pieces the loading process decoded."""
    parent_pieces: list[int] = []
    real_consume = parallel.consume_piece

    def slow_consume(events: list[Any]) -> Any:
        parent_pieces.append(len(events))
        time.sleep(0.01)
        return real_consume(events)

    monkeypatch.setattr(parallel, "consume_piece", slow_consume)
    return parent_pieces


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    # pieces of a few KB, so a sample of a few MB is cut into hundreds
    monkeypatch.setattr(chunking, "CHUNK_BYTES", 16 * 1024)


@pytest.mark.parametrize(("name", "indent"), [("train_compiled", None), ("train_eager", 1), ("ddp_train.rank0", None), ("fix_churn_before", None), ("train_with_stack", None)])
def test_helpers_give_the_frames_of_one_process(
    name: str, indent: int | None, small_pieces: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a real trace as plain JSON, cut into many pieces, and a parent that decodes
    # slowly, so the helpers surely take some of the pieces
    path = _plain_copy(tmp_path, name, indent=indent)
    one = ti.load(path, cache=False, workers=1)
    parent_pieces = _slow_parent(monkeypatch)
    # WHEN it is decoded by three processes
    three = ti.load(path, cache=False, workers=3)
    # THEN the helpers decoded part of it, and every frame and name equals one process's
    plan_pieces = chunking.plan_pieces(bytearray(path.read_bytes()), 0, None).pieces
    assert 0 < len(parent_pieces) < plan_pieces
    _assert_same(one, three)


def test_text_pids_are_numbered_by_label_whoever_decodes_them(small_pieces: None, tmp_path: Path) -> None:
    # GIVEN a hand-made trace whose events carry text pids, met in an order unlike their
    # sorted order, spread over many pieces
    events: list[dict[str, Any]] = []
    for i in range(3000):
        pid: int | str = ("Zeta" if i % 3 else "Alpha") if i > 500 else 7
        events.append(op(f"op{i}", i * 10, 5, pid=pid))
        if i % 100 == 1:
            events.append({"ph": "C", "name": "gpu", "pid": pid, "ts": i * 10, "args": {"util": i}})
            events.append({"ph": "i", "name": "[memory]", "pid": pid, "tid": pid, "ts": i * 10, "args": {"Bytes": i, "Total Allocated": i}})
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "args": {"name": f"t{pid}"}})
    path = write_trace(tmp_path / "text_pids.json", events)
    # WHEN it is loaded by one process and by two
    one = ti.load(path, cache=False, workers=1)
    two = ti.load(path, cache=False, workers=2)
    # THEN both number the labels the same way, in sorted order
    _assert_same(one, two)
    assert one.meta.pid_labels == {-2: "Alpha", -3: "Zeta"}
    assert set(two.memory["pid"].to_list()) == {7, -2, -3} == set(two.counters["pid"].to_list())
    assert two.meta.thread_names["-3:-3"] == "tZeta"


def test_a_helper_that_dies_loses_no_piece(small_pieces: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN a helper that takes two pieces and dies without delivering them
    path = _plain_copy(tmp_path, "train_compiled")
    one = ti.load(path, cache=False, workers=1)
    claimed: list[int] = []

    def dying_helper(
        path_: Path, map_path: str, plan: Any, shared: int, spool: Path, number: int
    ) -> Any:
        code = (
            "import sys; from pathlib import Path; from traceinsight.trace.parallel import _claim; "
            f"c = Path({str(spool / 'next')!r}); "
            f"print(_claim(c, {shared}), _claim(c, {shared})); sys.exit(3)"
        )
        env = dict(os.environ, PYTHONPATH=str(Path(parallel.__file__).resolve().parents[2]))
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env)
        claimed.extend(int(i) for i in proc.communicate()[0].split())
        return proc

    monkeypatch.setattr(parallel, "_start_helper", dying_helper)
    # WHEN it is decoded with that helper
    two = ti.load(path, cache=False, workers=2)
    # THEN the parent decoded the helper's pieces too: nothing is missing
    assert claimed == [0, 1]
    _assert_same(one, two)


def test_a_bad_cut_found_by_a_helper_falls_back_to_one_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # GIVEN a hand-made trace whose args hold lists of objects, so "}, {" also occurs inside
    # events and some cuts land inside one
    events = [op(f"op{i}", i * 10, 5, args={"External id": i, "list": [{"a": 1}, {"b": 2}] * 20}) for i in range(400)]
    path = write_trace(tmp_path / "nested.json", events)
    monkeypatch.setattr(chunking, "CHUNK_BYTES", 300)
    # WHEN it is decoded with helpers
    trace = ti.load(path, cache=False, workers=2)
    # THEN the bad cuts are undone and every event is read once
    assert trace.events["external_id"].to_list() == list(range(400))
    assert not list(Path(parallel._spool_root() or "/tmp").glob("traceinsight-decode-*"))


def test_no_helper_for_one_worker_or_a_small_file(small_pieces: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: Any) -> Any:
        raise AssertionError("no helper should start")

    monkeypatch.setattr(parallel, "_start_helper", refuse)
    plain = _plain_copy(tmp_path, "train_compiled")
    ti.load(plain, cache=False, workers=1)
    monkeypatch.setenv(parallel.WORKERS_ENV, "1")
    ti.load(plain, cache=False)
    monkeypatch.delenv(parallel.WORKERS_ENV)
    # a gzip trace that could not go to an in-memory file: its bytearray is not mappable
    monkeypatch.setattr(source, "_memfd", lambda: None)
    ti.load(sample_path("train_compiled"), cache=False, workers=4)
    # fewer pieces than it takes to pay for a process
    monkeypatch.setattr(chunking, "CHUNK_BYTES", 8 * 1024 * 1024)
    ti.load(plain, cache=False, workers=4)


@pytest.mark.skipif(source._memfd() is None, reason="needs memfd_create")
def test_helpers_decode_a_gzip_trace_from_its_text_in_memory(
    small_pieces: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a real gzip trace, cut into many pieces, and a parent that decodes slowly
    path = tmp_path / "train_eager.json.gz"
    path.write_bytes(sample_path("train_eager").read_bytes())
    one = ti.load(path, cache=False, workers=1)
    maps: list[str] = []
    real_start = parallel._start_helper

    def start(path_: Path, map_path: str, *rest: Any) -> Any:
        maps.append(map_path)
        return real_start(path_, map_path, *rest)

    parent_pieces = _slow_parent(monkeypatch)
    monkeypatch.setattr(parallel, "_start_helper", start)
    # WHEN it is decoded by two processes
    two = ti.load(path, cache=False, workers=2)
    # THEN the helper mapped the gunzipped text in memory (not the .gz file), took pieces,
    # and the frames equal one process's
    assert len(maps) == 1 and maps[0].startswith("/proc/") and "/fd/" in maps[0]
    text = gzip.decompress(path.read_bytes())
    assert 0 < len(parent_pieces) < chunking.plan_pieces(bytearray(text), 0, None).pieces
    _assert_same(one, two)
    assert two.meta.path == str(path)


def test_helpers_for_follows_cores_and_caps() -> None:
    import mmap

    with open(sample_path("train_compiled"), "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    many = chunking.Plan(0, None, len(data), tuple((i, i + 2) for i in range(100)), (True,) * 100)
    few = chunking.Plan(0, None, len(data), tuple((i, i + 2) for i in range(3)), (True,) * 3)
    assert parallel.helpers_for(many, data, 2) == 2
    assert parallel.helpers_for(many, data, 50) == parallel.MAX_HELPERS
    assert parallel.helpers_for(few, data, 2) == 0
    assert parallel.helpers_for(many, bytearray(b"x"), 2) == 0


def _memory_file_bytes(data: Any) -> int:
    """Bytes the in-memory file of a gunzipped text holds now (freed pages excluded)."""
    return int(os.fstat(data._fd).st_blocks) * 512


@pytest.mark.skipif(source._memfd() is None, reason="needs memfd_create")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_gzip_texts_decoded_pages_are_freed_as_the_decode_goes(
    workers: int, small_pieces: None, tmp_path: Path
) -> None:
    from traceinsight.trace.reader import read_trace

    # GIVEN a real gzip trace, cut into many pieces
    path = tmp_path / "train_eager.json.gz"
    path.write_bytes(sample_path("train_eager").read_bytes())
    plain = tmp_path / "train_eager.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    data = source.read_bytes(path)
    assert isinstance(data, source.Gunzipped)
    assert _memory_file_bytes(data) >= len(data)
    # WHEN it is decoded, by one process or two
    read_trace(path, data, workers=workers)
    # THEN the text's memory was handed back, all but the pages where the pieces meet
    # (about 1 in 4 of 16 KB pieces, at 4 KB pages), and the trace equals the plain file's
    assert _memory_file_bytes(data) < 0.35 * len(data)
    data.close()
    _assert_same(ti.load(plain, cache=False, workers=1), ti.load(path, cache=False, workers=workers))


@pytest.mark.skipif(source._memfd() is None, reason="needs memfd_create")
@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_cut_after_freed_pages_decodes_the_gzip_text_again(
    workers: int, small_pieces: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a hand-made gzip trace: plain events for its first ~150 KB, then events whose args
    # hold lists of objects, so that later cuts land inside an event, after earlier pieces
    # were decoded and their pages freed
    plain_events = [op(f"op{i}", i * 10, 5, args={"External id": i}) for i in range(1500)]
    nested = [
        op(f"op{i}", i * 10, 5, args={"External id": i, "list": [{"a": 1}, {"b": 2}] * 20})
        for i in range(1500, 1800)
    ]
    path = write_trace(tmp_path / "nested.json.gz", plain_events + nested, gz=True)
    refills: list[int] = []
    real_refill = source.Gunzipped.refill

    def refill(self: source.Gunzipped) -> None:
        refills.append(_memory_file_bytes(self))
        real_refill(self)

    monkeypatch.setattr(source.Gunzipped, "refill", refill)
    # WHEN it is loaded
    trace = ti.load(path, cache=False, workers=workers)
    # THEN the freed text was decompressed again before the careful decode, and every event
    # is read once
    assert refills and min(refills) < 0.9 * len(gzip.decompress(path.read_bytes()))
    assert trace.events["external_id"].to_list() == list(range(1800))
