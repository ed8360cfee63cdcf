"""Decoding one piece of the events array: typed, or field by field when a value is off.

A piece whose JSON does not parse raises :class:`BadCut` (the cut that made it was wrong);
a piece that parses but has a field of an unexpected type is decoded loosely and each event
coerced, keeping what has the right type and counting what was dropped.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

from traceinsight.errors import TraceFormatError
from traceinsight.trace.events import (
    EVENTS_TYPE,
    STRUCT_BY_PHASE,
    CounterEvent,
    EventArgs,
    MetadataEvent,
    UnknownEvent,
)


class BadCut(Exception):
    """A piece is not valid JSON: the cut that made it fell inside a string or a value."""


def decode_events(path: Path, buf: Any) -> list[Any]:
    """The events of one piece (a JSON array), typed; a :class:`Coerced` list when some
    event had a field of an unexpected type."""
    try:
        return msgspec.json.decode(buf, type=EVENTS_TYPE)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise BadCut from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, "not valid UTF-8 text inside traceEvents") from exc
    # Some event has a field of an unexpected type: decode loosely and coerce field by field.
    try:
        items = msgspec.json.decode(buf, type=list[Any])
    except msgspec.DecodeError as exc:
        # also a bad UTF-8 byte in a string the typed decode skipped (msgspec 0.23); a cut
        # through a multi-byte character reads the same, so the caller decides
        raise BadCut from exc
    except UnicodeDecodeError as exc:  # older msgspec: the same bad byte
        raise TraceFormatError(path, "not valid UTF-8 text inside traceEvents") from exc
    coerced = Coerced()
    coerced.extend(_coerce_event(item, coerced) for item in items)
    return coerced


class Coerced(list):  # type: ignore[type-arg]
    """Events decoded field by field; an entry that was not a JSON object is None."""

    bad_args = 0


def _coerce_event(item: Any, coerced: Coerced) -> Any:
    if not isinstance(item, dict):
        return None  # not an object: counted and skipped
    ph = item.get("ph")
    phase = ph if isinstance(ph, str) else ""
    struct = STRUCT_BY_PHASE.get(phase)
    if struct is None:
        return UnknownEvent(PH=phase)
    fields = struct.__struct_fields__
    values: dict[str, Any] = {}
    for key in ("name", "cat"):
        if key in fields:
            values[key] = _as_str(item.get(key))
    for key in ("pid", "tid"):
        if key in fields:
            value = item.get(key)
            values[key] = (
                value if isinstance(value, (int, str)) and not isinstance(value, bool) else None
            )
    for key in ("ts", "dur"):
        if key in fields:
            values[key] = _as_float(item.get(key))
    if "args" in fields:
        args = item.get("args")
        if struct in (CounterEvent, MetadataEvent):
            values["args"] = args
        elif args is not None:
            values["args"] = _coerce_args(args, coerced)
    return struct(**values)


def _coerce_args(args: Any, coerced: Coerced) -> EventArgs:
    """Args decoded leniently: the fields whose values have the right type are kept, the rest
    dropped and counted."""
    if not isinstance(args, dict):
        coerced.bad_args += 1
        return EventArgs()
    try:
        return msgspec.json.decode(msgspec.json.encode(args), type=EventArgs)
    except (msgspec.ValidationError, msgspec.EncodeError):
        pass
    kept: dict[str, Any] = {}
    for key in EventArgs.__struct_encode_fields__:
        if key not in args:
            continue
        try:
            msgspec.json.decode(msgspec.json.encode({key: args[key]}), type=EventArgs)
        except (msgspec.ValidationError, msgspec.EncodeError):
            coerced.bad_args += 1
            continue
        kept[key] = args[key]
    return msgspec.json.decode(msgspec.json.encode(kept), type=EventArgs)


def _as_str(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            return None
    else:
        return None
    return result if math.isfinite(result) else None
