"""Parents of host events on one thread at the edges of nesting (hand-made traces, written by
hand, not recorded): spans ending together, adjacent siblings, zero-length calls. Through
``ti.load``, the public loader."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceinsight as ti
from tests.handmade import HandMadeTrace, op, write_trace
from traceinsight.errors import TraceFormatError


def parents(t: HandMadeTrace, path: Path) -> dict[str, str | None]:
    write_trace(path, t.events, baseTimeNanoseconds=t.base_ns)
    ev = ti.load(path, cache=False).events.select("id", "parent", pl.col("name").cast(pl.String))
    name_of = dict(zip(ev["id"].to_list(), ev["name"].to_list(), strict=True))
    return {
        n: name_of.get(p) for n, p in zip(ev["name"].to_list(), ev["parent"].to_list(), strict=True)
    }


def test_nesting_edges(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 100)
    t.host("outer", 10, 40)  # 10..50
    t.host("ends_with_outer", 20, 30)  # 20..50: inside, ending with it
    t.host("next_sibling", 50, 10)  # 50..60: starts as outer ends: not inside it
    t.host("zero_at_sibling_end", 60, 0)  # 60: after next_sibling, not inside it
    t.host("zero_inside", 55, 0)  # 55: inside next_sibling
    t.host("later", 70, 10)
    p = parents(t, tmp_path / "nest.json")
    assert p == {
        "ProfilerStep#1": None,
        "outer": "ProfilerStep#1",
        "ends_with_outer": "outer",
        "next_sibling": "ProfilerStep#1",
        "zero_inside": "next_sibling",
        "zero_at_sibling_end": "ProfilerStep#1",
        "later": "ProfilerStep#1",
    }


def test_zero_length_call_at_the_start_of_its_parent(tmp_path: Path) -> None:
    t = HandMadeTrace()
    t.step(1, 0, 100)
    t.host("op", 70, 10)  # 70..80
    t.host("zero_at_op_start", 70, 0)
    t.host("next_op", 85, 5)
    # Two zero-length calls at the same instant: the first does not contain the second.
    t.host("inner", 72, 4)  # 72..76 inside op
    t.host("zero_a", 72, 0)
    t.host("zero_b", 72, 0)
    p = parents(t, tmp_path / "zero.json")
    assert p["inner"] == "op"
    assert p["zero_a"] == "inner" and p["zero_b"] == "inner"
    assert p["op"] == "ProfilerStep#1"
    assert p["zero_at_op_start"] == "op"
    assert p["next_op"] == "ProfilerStep#1"


def test_a_thread_spanning_just_under_2_62_ns_still_nests(tmp_path: Path) -> None:
    # Nesting keys are (thread, time) in one int64 and need the span + 2 ns below 2**62: a
    # thread from 0 to 2**62 - 3 ns fits (4611686018427386 µs is 2**62 - 2048 ns as a double).
    path = write_trace(
        tmp_path / "long.json",
        [op("a", 0, 1), op("b", 4611686018427386.0, 2.045)],
        baseTimeNanoseconds=0,
    )
    ev = ti.load(path, cache=False).events
    assert ev["end_ns"].max() == 2**62 - 3
    assert ev["parent"].to_list() == [None, None] and ev["depth"].to_list() == [0, 0]


def test_threads_spanning_too_long_for_nesting_keys_are_refused(tmp_path: Path) -> None:
    # Four threads over 95 years: their (thread, time) keys would not fit an int64; the load
    # says so instead of nesting them wrongly.
    events = [
        op(name, ts, 0.5, tid=tid) for tid in (1, 2, 3, 4) for name, ts in (("a", 0), ("b", 3e15))
    ]
    with pytest.raises(TraceFormatError, match="too long a time for nesting keys"):
        ti.load(write_trace(tmp_path / "too_long.json", events, baseTimeNanoseconds=0), cache=False)
