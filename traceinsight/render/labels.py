"""Readable kernel names: C++ names without what makes them unreadable (a leaf module, so that
every renderer can use it without importing another's view)."""

from __future__ import annotations

import re

_NOISE = re.compile(r"^void |at::native::|\(anonymous namespace\)::|c10::|std::")


def _without_arguments(name: str) -> str:
    """``name`` up to its argument list: the first ``(`` outside template brackets and braces."""
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<{[":
            depth += 1
        elif ch in ">}]":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


LABEL_WIDTH = 72


def kernel_label(name: str | None) -> str:
    """A kernel name without the namespaces, return type and argument list that make C++
    names unreadable (the template arguments stay: they tell the variants apart)."""
    return _without_arguments(_NOISE.sub("", name or ""))
