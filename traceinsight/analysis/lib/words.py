"""Small words every view shares: counts with their noun, and run labels that say what differs
between the runs (not what they share)."""

from __future__ import annotations

from collections.abc import Sequence

# Suffixes of trace files: a label drops them (".pt.trace.json.gz" -> "").
_SUFFIXES = (".gz", ".json", ".pt.trace", ".trace")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun in the right number: "1 step", "5 steps", "0 steps"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def stem(name: str) -> str:
    """A trace file's name without its .json/.gz/.pt.trace suffixes (the name itself if that
    leaves nothing)."""
    out = name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if out.endswith(suffix) and len(out) > len(suffix):
                out, changed = out[: -len(suffix)], True
    return out


def _parts(path: str) -> list[str]:
    return [p for p in path.replace("\\", "/").rstrip("/").split("/") if p not in ("", ".")]


def run_labels(paths: Sequence[str]) -> list[str]:
    """A short label per run, by what differs between the paths the user gave.

    Each path is read from its end: the file's stem, then the folders above it, and a run is
    labelled by the last component in which the runs differ. Two tensorboard folders
    ``a/`` and ``b/`` each holding ``host_1234.1700000001.pt.trace.json`` are "a" and "b" (their
    file names differ only in a timestamp the user never chose), and ``x/trace.json`` beside
    ``y/trace.json`` are "x" and "y". Labels that still collide get "(1)", "(2)"...
    """
    parts = [_parts(p) or [p] for p in paths]
    if not parts:
        return []
    stems = [stem(p[-1]) for p in parts]
    if len(parts) == 1:
        return stems
    depth = max(len(p) for p in parts)
    # The deepest folder level (from the end) at which the runs differ, above the file itself.
    for back in range(2, depth + 1):
        level = [p[-back] if len(p) >= back else "" for p in parts]
        if len(set(level)) == len(level) and all(level):
            # Folders that tell the runs apart: prefer them when the files share a long
            # start (timestamps, host names) or are the same name.
            if len(set(stems)) < len(stems) or _shared_start(stems) >= 8:
                return level
            break
    if len(set(stems)) == len(stems):
        return stems
    seen: dict[str, int] = {}
    out = []
    for s in stems:
        seen[s] = seen.get(s, 0) + 1
        out.append(f"{s} ({seen[s]})")
    return out


def _shared_start(names: Sequence[str]) -> int:
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n
