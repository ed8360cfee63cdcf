"""Which sections a command shows: the names given to ``--only`` / ``--skip``, checked against
the sections there are (a report's analyses, a job's or a series' sections)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from traceinsight.errors import UsageError


def given_names(option: Iterable[str] | None) -> tuple[str, ...] | None:
    """The names an ``--only`` / ``--skip`` option was given, comma-separated lists split, in
    the order given (None when the option was not given); the JSON envelope records these."""
    if option is None:
        return None
    return tuple(s.strip() for part in option for s in part.split(",") if s.strip())


def choose_sections(
    names: Sequence[str], only: Iterable[str] | None, skip: Iterable[str] | None, *, what: str
) -> list[str]:
    """``names`` (in their order) less those not in ``only`` or in ``skip``; each option may hold
    comma-separated names. An unknown name is a usage error listing the valid ones, as for
    ``analyze``'s sections."""
    only_list = list(given_names(only) or ())
    skip_list = list(given_names(skip) or ())
    unknown = sorted(set(only_list + skip_list) - set(names))
    if unknown:
        raise UsageError(f"unknown {what}(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    return [n for n in names if (not only_list or n in only_list) and n not in skip_list]
