"""Finding the ``traceEvents`` array in a buffer and decoding it in pieces cut in place.

The pieces bound the Python objects alive at a time; each is decoded by
:func:`~traceinsight.trace.lenient.decode_events`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from traceinsight.errors import TraceFormatError
from traceinsight.trace import progress
from traceinsight.trace.lenient import BadCut, decode_events
from traceinsight.trace.source import FIRST_TOKEN, Buffer, release_pages

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
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, "not valid UTF-8 text in the trace header") from exc
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


def decode_chunks(
    path: Path, data: Buffer, lo: int, hi: int | None, header: dict[str, Any]
) -> Iterator[list[Any]]:
    """Decode the events array that starts at data[lo] in pieces of about CHUNK_BYTES.

    A cut lands on "},<space>{" between two events: we write "]" just after the "}" and
    "[" just before the "{", so each piece is a JSON array read in place, without a copy
    (a piece is copied only where the JSON has no spare byte there, as in "},{").
    A cut inside a string or a nested list would leave a piece that is invalid JSON; the
    decode detects that and the bytes are put back. With ``hi`` known, the rest is then
    decoded in one piece; without it, :class:`NoFastPath` asks for a careful decode.

    ``hi`` None: the array's end is not known yet. No cut is made in the last
    CHUNK_BYTES of the file, and the last piece is decoded together with the rest of the
    top-level object, which checks that rest and adds its other keys to ``header``.
    """
    view = memoryview(data)
    limit = len(data) - CHUNK_BYTES if hi is None else hi
    cuts: list[tuple[int, int]] = []  # (just after a "}", its "{") at each cut
    pos = lo + 1
    while limit - pos > CHUNK_BYTES:
        match = _BOUNDARY.search(data, pos + CHUNK_BYTES, limit - 1)
        if match is None:
            break
        pos = match.end() - 1
        cuts.append((match.start() + 1, match.end() - 1))
    in_place = [b - a >= 2 for a, b in cuts]
    patches = [
        (at, data[at]) for (a, b), ok in zip(cuts, in_place, strict=True) if ok for at in (a, b - 1)
    ]
    for (a, b), ok in zip(cuts, in_place, strict=True):
        if ok:
            data[a] = 0x5D  # "]"
            data[b - 1] = 0x5B  # "["
    decoded = 0
    try:
        for index in range(len(cuts) + 1):
            is_last = index == len(cuts)
            start = lo if index == 0 else cuts[index - 1][1] - in_place[index - 1]
            opener = b"" if index == 0 or in_place[index - 1] else b"["
            try:
                if is_last and hi is None:
                    events = _decode_tail(path, opener + bytes(view[start:]), header)
                elif is_last:
                    events = decode_events(
                        path, view[start:hi] if not opener else opener + bytes(view[start:hi])
                    )
                else:
                    end = cuts[index][0] + in_place[index]
                    closer = b"" if in_place[index] else b"]"
                    piece = (
                        view[start:end]
                        if not (opener or closer)
                        else opener + bytes(view[start:end]) + closer
                    )
                    events = decode_events(path, piece)
            except BadCut:
                if hi is None:
                    raise NoFastPath from None
                for at, byte in patches:
                    data[at] = byte
                patches = []
                if index == 0:
                    yield decode_events(path, view[lo:hi])
                else:
                    yield decode_events(path, b"[" + bytes(view[cuts[index - 1][1] : hi]))
                return
            decoded += len(events)
            progress.report("decoding", len(data) if is_last else cuts[index][0], len(data), decoded)
            yield events
            release_pages(data, start + 1, len(data) if is_last else cuts[index][0] - 1)
    finally:
        del view
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
