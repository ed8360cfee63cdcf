"""Build a large benchmark trace by tiling a real trace along time.

Each copy of the source's events is shifted past the end of the previous copy, and the ids
that link events (correlation, External id, Python ids, flow ids) are offset per copy so the
copies stay distinct, as in one long profiling run. The output keeps Kineto's layout (one
event per line, Kineto's separators) so the bytes per event match what users' files look like
(~250–300 bytes per event).

    python benchmarks/make_large_trace.py sample_traces/train_eager.json.gz -o .bench/large.json --target-mb 450
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

_ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Sequence number")


def _load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    if isinstance(data, list):
        data = {"traceEvents": data}
    return data


def _shift(event: dict[str, Any], copy: int, dt_us: float, id_stride: int) -> dict[str, Any]:
    out = dict(event)
    if copy == 0:
        return out
    if isinstance(out.get("ts"), (int, float)) and out.get("ph") != "M":
        out["ts"] = round(out["ts"] + copy * dt_us, 3)
    if "id" in out and isinstance(out["id"], int):
        out["id"] = out["id"] + copy * id_stride
    args = out.get("args")
    if isinstance(args, dict):
        new_args = dict(args)
        for key in _ID_ARGS:
            if isinstance(new_args.get(key), int) and new_args[key] >= 0:
                new_args[key] = new_args[key] + copy * id_stride
        out["args"] = new_args
    if isinstance(out.get("name"), str) and out["name"].startswith("ProfilerStep#"):
        try:
            step = int(out["name"][len("ProfilerStep#") :])
            out["name"] = f"ProfilerStep#{step + copy * 1000}"
        except ValueError:
            pass
    return out


def build(source: Path, output: Path, target_mb: float, tiles: int | None = None) -> tuple[int, int]:
    data = _load(source)
    events = data.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    starts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    ends = [e["ts"] + e.get("dur", 0) for e in body if isinstance(e.get("ts"), (int, float))]
    dt_us = (max(ends) - min(starts)) + 10.0
    id_stride = 10 ** len(str(max(_max_id(body), 1)))
    encoded_one = sum(len(json.dumps(e)) + 4 for e in body)
    copies = tiles if tiles else max(1, int(target_mb * 1e6 / encoded_one))
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_suffix(output.suffix + ".tmp")
    n_events = 0
    with tmp.open("w") as out:
        out.write("{\n")
        for key, value in data.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        out.write('  "traceEvents": [\n')
        first = True
        for event in meta:
            out.write(("  " if first else ",\n  ") + json.dumps(event))
            first = False
        for copy in range(copies):
            for event in body:
                out.write(("  " if first else ",\n  ") + json.dumps(_shift(event, copy, dt_us, id_stride)))
                first = False
                n_events += 1
        out.write("\n  ]\n}\n")
    os.replace(tmp, output)
    return n_events + len(meta), copies


def _max_id(events: list[dict[str, Any]]) -> int:
    best = 0
    for e in events:
        args = e.get("args")
        if isinstance(args, dict):
            for key in _ID_ARGS:
                v = args.get(key)
                if isinstance(v, int) and v > best:
                    best = v
        if isinstance(e.get("id"), int) and e["id"] > best:
            best = e["id"]
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=Path(".bench/large.json"))
    parser.add_argument("--target-mb", type=float, default=450.0)
    parser.add_argument("--tiles", type=int, default=None, help="copies of the source (overrides --target-mb)")
    args = parser.parse_args()
    n_events, copies = build(args.source, args.output, args.target_mb, args.tiles)
    size_mb = args.output.stat().st_size / 1e6
    print(
        f"wrote {args.output}: {size_mb:.0f} MB, {n_events:,} events ({copies} copies of {args.source})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
