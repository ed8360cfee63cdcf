"""Finding the ``traceEvents`` array in a buffer and decoding it in pieces cut in place.

The pieces bound the Python objects alive at a time; each is decoded by
:func:`~traceinsight.trace.lenient.decode_events`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from traceinsight.errors import TraceFormatError
from traceinsight.trace import progress
from traceinsight.trace.lenient import BadCut, decode_events
from traceinsight.trace.source import FIRST_TOKEN, Buffer, discard_pages

# Target size of one decoded chunk of the events array; bounds the live Python objects.
CHUNK_BYTES = 8 * 1024 * 1024
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


class NoFastPath(Exception):
    """The quick layout guess did not hold; decode again after validating the whole file."""


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SENTINEL_KEY = b'"\\u0000":0}'


def find_events(data: Buffer) -> tuple[dict[str, Any], int] | None:
    """The header fields before ``traceEvents`` and where its array starts, without a pass
    over the whole file; None when the file does not look like that.

    The first ``"traceEvents": [`` is the real key exactly when the bytes before it, closed
    with a dummy key, form a valid JSON object: a match inside a string or a nested value
    would leave them unbalanced. What follows the array is checked when its last piece is
    decoded (see :func:`decode_chunks`).
    """
    first = FIRST_TOKEN.match(data)
    if first is None or first.group(1) != b"{":
        return None
    match = _EVENTS_KEY.search(data)
    if match is None:
        return None
    try:
        prefix = msgspec.json.decode(bytes(data[: match.start()]) + _SENTINEL_KEY)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if not isinstance(prefix, dict):
        return None
    prefix.pop("\x00", None)
    return prefix, match.end() - 1


def split_top_level(path: Path, data: Buffer) -> tuple[dict[str, Any], int, int]:
    """Header fields and the [lo, hi) byte range of the traceEvents array within ``data``."""
    first = FIRST_TOKEN.match(data)
    token = first.group(1) if first else b""
    if token == b"[":
        # The Chrome "JSON array" form: the whole file is the events array.
        try:
            msgspec.json.decode(data, type=msgspec.Raw)  # validates the syntax
        except msgspec.DecodeError as exc:
            raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
        lo = first.start(1)  # type: ignore[union-attr]
        return {}, lo, data.rfind(b"]") + 1
    if token != b"{":
        raise TraceFormatError(path, "not JSON (expected a Chrome trace object)")
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise TraceFormatError(path, f"not valid JSON ({_json_reason(exc)})") from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"not valid UTF-8 text at byte {exc.start}") from exc
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, "not a Chrome trace: top level is not an object") from exc
    events_raw = top.pop("traceEvents", None)
    if events_raw is None:
        raise TraceFormatError(path, "not a Chrome trace: no 'traceEvents' key")
    if bytes(memoryview(events_raw)[:1]) != b"[":
        raise TraceFormatError(path, "not a Chrome trace: 'traceEvents' is not a list")
    try:
        header = {key: msgspec.json.decode(value) for key, value in top.items()}
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        # The Raw pass above checks structure only; strings are checked on this decode.
        raise TraceFormatError(path, f"not valid JSON in the trace header ({exc})") from exc
    lo = _offset_in(events_raw, data)
    del top, events_raw
    return header, lo[0], lo[1]


def _offset_in(raw: msgspec.Raw, data: Buffer) -> tuple[int, int]:
    """Where a zero-copy Raw slice sits inside ``data`` (msgspec does not copy Raw values)."""
    import numpy as np

    start = np.frombuffer(raw, np.uint8).ctypes.data - np.frombuffer(data, np.uint8).ctypes.data
    if not 0 <= start <= len(data) - len(raw):  # pragma: no cover - a msgspec that copies
        raise RuntimeError("cannot locate traceEvents in the input buffer")
    return start, start + len(raw)


def _json_reason(exc: Exception) -> str:
    text = str(exc)
    if "truncated" in text.lower():
        return "truncated: the file ends in the middle of the JSON"
    return text


@dataclass(frozen=True)
class Plan:
    """Where the events array at ``data[lo]`` is cut into pieces of about CHUNK_BYTES.

    Each cut lands on "},<space>{" between two events: ``cuts`` holds (just after the "}",
    its "{"). Where there is room (``in_place``), "]" is written just after the "}" and "["
    just before the "{", so the piece is a JSON array read in place, without a copy; elsewhere
    (as in "},{") the piece is copied with its brackets added.

    ``hi`` None: the array's end is not known yet. No cut is made in the last CHUNK_BYTES of
    the file, and the last piece is decoded together with the rest of the top-level object,
    which checks that rest and adds its other keys to the header.
    """

    lo: int
    hi: int | None
    size: int
    cuts: tuple[tuple[int, int], ...]
    in_place: tuple[bool, ...]

    @property
    def pieces(self) -> int:
        return len(self.cuts) + 1

    def patch(self, data: Buffer) -> list[tuple[int, int]]:
        """Write the brackets of the in-place cuts into ``data``; the bytes they replaced."""
        patches = [
            (at, data[at])
            for (a, b), ok in zip(self.cuts, self.in_place, strict=True)
            if ok
            for at in (a, b - 1)
        ]
        for (a, b), ok in zip(self.cuts, self.in_place, strict=True):
            if ok:
                data[a] = 0x5D  # "]"
                data[b - 1] = 0x5B  # "["
        return patches

    def start(self, index: int) -> int:
        if index == 0:
            return self.lo
        return self.cuts[index - 1][1] - self.in_place[index - 1]

    def end(self, index: int) -> int:
        """Just past the piece's last byte (the file's end for an open-ended last piece)."""
        if index == len(self.cuts):
            return self.size if self.hi is None else self.hi
        return self.cuts[index][0] + self.in_place[index]

    def buffer(self, view: memoryview, index: int) -> Any:
        """The piece as a JSON array: a view into the buffer where it was cut in place."""
        start, end = self.start(index), self.end(index)
        opener = b"" if index == 0 or self.in_place[index - 1] else b"["
        last = index == len(self.cuts)
        closer = b"" if last or self.in_place[index] else b"]"
        if not (opener or closer):
            return view[start:end]
        return opener + bytes(view[start:end]) + closer

    def release(self, data: Buffer, index: int) -> None:
        """Hand the decoded piece's pages back for good (those holding brackets are kept)."""
        discard_pages(data, self.start(index) + 1, self.end(index) - 1)


def plan_pieces(data: Buffer, lo: int, hi: int | None) -> Plan:
    limit = len(data) - CHUNK_BYTES if hi is None else hi
    cuts: list[tuple[int, int]] = []
    pos = lo + 1
    while limit - pos > CHUNK_BYTES:
        match = _BOUNDARY.search(data, pos + CHUNK_BYTES, limit - 1)
        if match is None:
            break
        pos = match.end() - 1
        cuts.append((match.start() + 1, match.end() - 1))
    return Plan(lo, hi, len(data), tuple(cuts), tuple(b - a >= 2 for a, b in cuts))


def decode_piece(
    path: Path, view: memoryview, plan: Plan, index: int, header: dict[str, Any]
) -> list[Any]:
    """The events of one piece of a patched buffer; :class:`BadCut` when a cut fell inside
    a string or a nested value (the piece is then not valid JSON)."""
    if index == len(plan.cuts) and plan.hi is None:
        return _decode_tail(path, plan.buffer(view, index), header)
    return decode_events(path, plan.buffer(view, index))


def decode_chunks(
    path: Path, data: Buffer, plan: Plan, header: dict[str, Any]
) -> Iterator[list[Any]]:
    """Decode the pieces of ``plan`` one after the other, in place.

    A cut inside a string or a nested list leaves a piece that is invalid JSON; the decode
    detects that and the bytes are put back. With ``hi`` known, the rest is then decoded in
    one piece; without it, :class:`NoFastPath` asks for a careful decode.
    """
    view = memoryview(data)
    patches = plan.patch(data)
    decoded = 0
    try:
        for index in range(plan.pieces):
            try:
                events = decode_piece(path, view, plan, index, header)
            except BadCut:
                if plan.hi is None:
                    raise NoFastPath from None
                restore(data, patches)
                patches = []
                start = plan.lo if index == 0 else plan.cuts[index - 1][1]
                opener = b"" if index == 0 else b"["
                rest = view[start : plan.hi] if not opener else opener + bytes(view[start : plan.hi])
                try:
                    tail_events = decode_events(path, rest)
                except BadCut as exc:
                    # The array's bounds are known, so no cut is left to blame: the bytes
                    # between them are not JSON, or not UTF-8 text.
                    what = "UTF-8 text" if "UTF-8" in str(exc.__cause__) else "JSON"
                    raise TraceFormatError(path, f"not valid {what} inside traceEvents") from exc
                yield tail_events
                return
            decoded += len(events)
            done = len(data) if index == plan.pieces - 1 else plan.end(index)
            progress.report("decoding", done, len(data), decoded)
            yield events
            plan.release(data, index)
    finally:
        del view
        restore(data, patches)


def restore(data: Buffer, patches: list[tuple[int, int]]) -> None:
    for at, byte in patches:
        data[at] = byte


def _decode_tail(path: Path, piece: bytes, header: dict[str, Any]) -> list[Any]:
    """The events of the last piece (which starts with "["), and the keys after the array."""
    try:
        rest = msgspec.json.decode(b'{"traceEvents":' + piece, type=dict[str, msgspec.Raw])
        tail = {
            key: msgspec.json.decode(value) for key, value in rest.items() if key != "traceEvents"
        }
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        raise BadCut from None
    events = decode_events(path, rest["traceEvents"])
    header.update(tail)
    return events
