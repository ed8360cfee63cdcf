"""The output formats, by name: ``--format`` takes these names, ``-o``'s suffix picks one, and
each command's ``--format`` help lists the ones its kind of document can be written in.

A new format is one module under ``render/outputs/`` (an object with ``name``, ``suffixes``,
``binary``, ``kinds``, ``label`` and ``render``) and one line here.
"""

from __future__ import annotations

from traceinsight.errors import UsageError
from traceinsight.render.outputs import csv, html, json, markdown, perfetto, terminal
from traceinsight.render.outputs.base import OutputFormat

FORMATS: dict[str, OutputFormat] = {}


def register(fmt: OutputFormat) -> None:
    """Add ``fmt`` (or replace the format of its name); its suffixes must be no other's."""
    taken = {s: f.name for f in FORMATS.values() if f.name != fmt.name for s in f.suffixes}
    clash = [s for s in fmt.suffixes if s in taken]
    if clash:
        raise ValueError(f"format {fmt.name!r}: suffix {clash[0]} already names {taken[clash[0]]!r}")
    FORMATS[fmt.name] = fmt


for _fmt in (terminal.FORMAT, json.FORMAT, markdown.FORMAT, html.FORMAT, csv.FORMAT, perfetto.FORMAT):
    register(_fmt)


def formats_of(kind: str) -> tuple[str, ...]:
    """The formats a kind of document can be written in, terminal first."""
    return tuple(name for name, fmt in FORMATS.items() if kind in fmt.kinds)


def by_suffix(suffix: str) -> OutputFormat | None:
    for fmt in FORMATS.values():
        if suffix.lower() in fmt.suffixes:
            return fmt
    return None


def get(name: str) -> OutputFormat:
    fmt = FORMATS.get(name)
    if fmt is None:
        raise UsageError(f"unknown format {name!r}; choose from {', '.join(FORMATS)}")
    return fmt


def _listed(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} or {labels[-1]}"


def format_help(kind: str, *, also: str | None = None, default: str = "terminal") -> str:
    """The ``--format`` help of a command writing ``kind`` (and, given ``also``, a second kind it
    may write): the formats it takes, and the default."""
    names = formats_of(kind)
    text = _listed([FORMATS[name].label for name in names])
    if also is not None:
        extra = [FORMATS[name].label for name in formats_of(also) if name not in names]
        if extra:
            text += f"; a {also} also {_listed(extra)}"
    return f"{text}; default: from -o's suffix, else {default}"
