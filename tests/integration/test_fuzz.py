"""Mutated traces may only load or raise TraceFormatError, never anything else."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight.errors import TraceFormatError


def _small_real_trace() -> dict[str, Any]:
    doc = json.loads(gzip.decompress(sample_path("tiny_kernels").read_bytes()))
    events = doc["traceEvents"]
    kinds: dict[str, list[Any]] = {}
    for event in events:
        kinds.setdefault(str(event.get("cat")) + str(event.get("ph")), []).append(event)
    # a few events of every kind keeps the fuzz fast and still covers every code path
    doc["traceEvents"] = [e for group in kinds.values() for e in group[:6]]
    return doc


BASE = _small_real_trace()
BASE_BYTES = json.dumps(BASE, indent=1).encode()
FIRST_KERNEL = next(
    i for i, e in enumerate(BASE["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "kernel"
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6,
)
FIELDS = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "id", "s"]
ARG_KEYS = ["correlation", "External id", "device", "stream", "grid", "Input Dims", "bytes", "Bytes", "Addr"]


def _check(path: Path) -> None:
    try:
        trace = ti.load(path, cache=False)
    except TraceFormatError as exc:
        assert str(path) in str(exc)
        # The loader's last-resort wrapper turns unexpected exceptions into this message;
        # reaching it means a case the reader did not anticipate.
        assert "unreadable trace content" not in str(exc), exc.__cause__
        return
    assert trace.events["dur_ns"].min() is None or trace.events["dur_ns"].min() >= 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(BASE["traceEvents"]) - 1), st.sampled_from(FIELDS + ARG_KEYS), json_values),
        min_size=1,
        max_size=6,
    ),
    drop=st.lists(st.integers(0, len(BASE["traceEvents"]) - 1), max_size=5),
)
# found by this test: a dur whose ns value overflows Int64 crashed the load
@example(edits=[(FIRST_KERNEL, "dur", -9.2e18)], drop=[])
def test_structural_mutations(tmp_path: Path, edits: list[tuple[int, str, Any]], drop: list[int]) -> None:
    # GIVEN the base trace with fields and args set to arbitrary JSON values, and some events
    # replaced by a number
    doc = json.loads(BASE_BYTES)
    events = doc["traceEvents"]
    for index, key, value in edits:
        event = events[index]
        if not isinstance(event, dict):
            continue
        if key in ARG_KEYS:
            args = event.get("args")
            if isinstance(args, dict):
                args[key] = value
        else:
            event[key] = value
    for index in sorted(set(drop), reverse=True):
        if index < len(events):
            events[index] = 7 if index % 2 else events[index]
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(doc))
    # WHEN it is loaded THEN it loads with no negative duration, or fails with a
    # TraceFormatError that names the file and is not the catch-all for a crash
    _check(path)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cuts=st.lists(st.tuples(st.integers(0, len(BASE_BYTES) - 1), st.binary(max_size=4)), min_size=1, max_size=4),
    gz=st.booleans(),
)
@example(cuts=[(127, b"\x80")], gz=False)  # a bad UTF-8 byte inside a header string
@example(cuts=[(BASE_BYTES.index(b'"ph"', 200) + 1, b"\xe6")], gz=False)  # ... in an event's key
def test_byte_mutations(tmp_path: Path, cuts: list[tuple[int, bytes]], gz: bool) -> None:
    data = bytearray(BASE_BYTES)
    for position, replacement in cuts:
        data[position : position + len(replacement) or position + 1] = replacement
    raw = bytes(data)
    path = tmp_path / "mutated.json"
    path.write_bytes(gzip.compress(raw) if gz else raw)
    _check(path)
