"""Names cut to a width without cutting a word, keeping the part that tells names apart.

A name is read as words: runs of letters and digits, split again at camel-case humps
(``Compiled|Fx|Graph``) and joined across a point between digits (``1.137`` is one word).
Everything else (``_ : < > # ( ) =`` and blanks) separates words. A name is only ever cut
between two words, so a cut name reads as whole words around an ellipsis
(``aten::…attention``, ``…annotation)``), never as fragments (``ate…ntion``, ``(no a…otation)``).

One exception: a word longer than :data:`LONG_WORD` characters (a hash, a mangled tile
list) may be cut inside, at least :data:`WORD_EDGE` characters from its ends, as a short
hash is shown by its start; no cut is ever next to a digit, where an ellipsis would make
a number read as another one.

In a column, the names that would read the same once cut are cut again around the part
where they differ (their shared start and end dropped first), so that different names never
print the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from rich.cells import cell_len

ELLIPSIS = "…"
LONG_WORD = 20  # longer words may be cut inside (hashes, tile lists), see the module doc
WORD_EDGE = 4  # characters kept at least at each end of a long word cut inside
HEAD_SHARE = 0.4  # of the kept characters, the share the head aims for (the tail tells apart)


def _joined(text: str, i: int) -> bool:
    """Whether the characters at ``i - 1`` and ``i`` belong to one word."""
    a, b = text[i - 1], text[i]
    if a.isalnum() and b.isalnum():
        if a.islower() and b.isupper():
            return False  # a camel-case hump: CompiledFx|Graph
        # an upper-case run ends before a capitalised word: HTTP|Server
        return not (a.isupper() and b.isupper() and i + 1 < len(text) and text[i + 1].islower())
    # a decimal point or thousands comma inside a number
    point_next = b in ".," and a.isdigit() and i + 1 < len(text) and text[i + 1].isdigit()
    point_before = a in ".," and b.isdigit() and i >= 2 and text[i - 2].isdigit()
    return point_next or point_before


@dataclass(frozen=True)
class Cuts:
    """Where ``text`` may end a kept head (``heads``) and start a kept tail (``tails``)."""

    heads: tuple[int, ...]
    tails: tuple[int, ...]
    # letters[i]: how many letters and digits text[:i] holds (what a cut keeps is scored by them)
    letters: tuple[int, ...]

    def kept(self, start: int, end: int) -> int:
        return self.letters[end] - self.letters[start]


# What a cut keeps: its letters and digits, less one for every 1/BALANCE cells its head is off its share of the
# width; then both sides kept; then its tail starting with a word; then the head nearest its share.
Score = tuple[int, bool, bool, float]
BALANCE = 0.3


@lru_cache(maxsize=4096)
def cuts(text: str) -> Cuts:
    """The places ``text`` may be cut: between words, or inside a long word (module doc)."""
    n = len(text)
    between = [i for i in range(1, n) if not _joined(text, i)]
    inside: list[int] = []
    bounds = [0, *between, n]
    for lo, hi in pairwise(bounds):
        if hi - lo > LONG_WORD and text[lo].isalnum():
            inside.extend(range(lo + WORD_EDGE, hi - WORD_EDGE + 1))
    # A long word keeps its start (as a short hash does): cut inside only at the end of a head.
    # Never next to a digit: "128…" would read as the number 128.
    heads = tuple(i for i in sorted(set(between) | set(inside)) if not text[i - 1].isdigit())
    tails = tuple(i for i in between if not text[i].isdigit())
    letters = [0]
    for ch in text:
        letters.append(letters[-1] + ch.isalnum())
    return Cuts((0, *heads, n), (0, *tails, n), tuple(letters))


def _first_at_least(values: Sequence[int], x: int) -> int | None:
    lo, hi = 0, len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return values[lo] if lo < len(values) else None


def _two_piece(text: str, width: int, lo: int, hi: int) -> tuple[Score, str] | None:
    """The best ``head…tail`` of at most ``width`` cells keeping ``text[lo:hi]`` whole in
    its head or its tail, scored as :data:`Score` says. None: no such cut."""
    n = len(text)
    c = cuts(text)
    target = HEAD_SHARE * (width - 1)
    best: tuple[Score, int, int] | None = None
    for h in c.heads:
        if h > width - 1:
            break
        t = _first_at_least(c.tails, max(h, n - (width - 1 - h)))
        if t is None or t <= h or (h < hi and t > lo):
            continue
        off = abs(h - target)
        score = (
            c.kept(0, h) + c.kept(t, n) - int(BALANCE * off),
            h > 0 and t < n,
            t == n or text[t].isalnum(),
            -off,
        )
        if best is None or score > best[0]:
            best = (score, h, t)
    return None if best is None else (best[0], text[: best[1]] + ELLIPSIS + text[best[2] :])


def _three_piece(text: str, width: int, lo: int, hi: int) -> tuple[Score, str] | None:
    """The best ``head…middle…tail`` whose middle is ``text[lo:hi]`` widened to whole words."""
    n = len(text)
    c = cuts(text)
    a = max((t for t in c.tails if t <= lo), default=0)
    b = _first_at_least(c.heads, hi)
    if a == 0 or b is None or b == n:
        return None
    room = width - (b - a) - 2  # for the head and the tail
    if room < 0:
        return None
    target = HEAD_SHARE * room
    best: tuple[Score, int, int] | None = None
    for h in c.heads:
        if h >= a or h > room:
            break
        t = _first_at_least(c.tails, max(b + 1, n - (room - h)))
        if t is None:
            continue
        score = (
            c.kept(0, h) + c.kept(a, b) + c.kept(t, n) - int(BALANCE * abs(h - target)),
            h > 0 and t < n,
            t == n or text[t].isalnum(),
            -abs(h - target),
        )
        if best is None or score > best[0]:
            best = (score, h, t)
    if best is None:
        return None
    _, h, t = best
    return best[0], text[:h] + ELLIPSIS + text[a:b] + ELLIPSIS + text[t:]


def shorten_end(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells from its end, at an allowed cut (module doc)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    heads = [h for h in cuts(text).heads if 0 < h <= width - 1]
    cut = heads[-1] if heads else width - 1
    # No word short enough: a plain cut, still never next to a digit.
    while not heads and cut > 1 and text[cut - 1].isdigit():
        cut -= 1
    return text[:cut].rstrip() + ELLIPSIS


def shorten(text: str, width: int, keep: tuple[int, int] | None = None) -> str:
    """``text`` cut to ``width`` cells by dropping words from its middle: the start says what
    it is, the end (template arguments, tile sizes, the op's last part) tells similar names
    apart. ``keep`` (start, end): a part that must stay (where names of a column differ);
    when it cannot stay whole, it is shown from its start."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    lo, hi = keep if keep is not None else (len(text), len(text))
    found = [
        x
        for x in (_two_piece(text, width, lo, hi), _three_piece(text, width, lo, hi))
        if x is not None
    ]
    if found:
        return max(found)[1]
    if keep is None:
        return shorten_end(text, width)
    # The differing part does not fit whole: shown from the word it starts in.
    start = max((t for t in cuts(text).tails if t <= lo), default=0)
    return (ELLIPSIS if start else "") + shorten_end(text[start:], width - (1 if start else 0))


def shorten_middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells in the middle, between words (see :func:`shorten`)."""
    return shorten(text, width)


def _common_prefix(texts: Sequence[str]) -> int:
    first, last = min(texts), max(texts)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return n


def _common_suffix(texts: Sequence[str]) -> int:
    return _common_prefix([t[::-1] for t in texts])


def shorten_distinct(names: Sequence[str], width: int) -> list[str]:
    """Each name cut to ``width`` cells (see :func:`shorten`) so that names which differ still
    read differently: where two cut names collide, each name of that group keeps the part where
    the group's names differ (the part between their common start and common end)."""
    out = [shorten(n, width) for n in names]
    for _ in range(4):
        groups: dict[str, list[int]] = {}
        for i, short in enumerate(out):
            groups.setdefault(short, []).append(i)
        clashes = [idx for idx in groups.values() if len({names[i] for i in idx}) > 1]
        if not clashes:
            return out
        for idx in clashes:
            texts = [names[i] for i in idx]
            pre = _common_prefix(texts)
            post = min(_common_suffix(texts), min(len(t) for t in texts) - pre)
            for i in idx:
                name = names[i]
                out[i] = shorten(name, width, (pre, max(pre, len(name) - post)))
    # Still the same (names differing only far apart): number them.
    seen: dict[str, int] = {}
    for i, short in enumerate(out):
        seen[short] = seen.get(short, 0) + 1
        if seen[short] > 1 and width > 6:
            tag = f" #{seen[short]}"
            out[i] = shorten(names[i], width - len(tag)) + tag
    return out
