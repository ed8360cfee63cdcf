"""Read-only SQL that cannot reach files: a query is checked before polars sees it.

polars SQL reads files through table functions (``SELECT * FROM read_csv('/etc/passwd')``,
also quoted: ``"read_csv"(...)``), and a context takes ``CREATE TABLE`` / ``DROP TABLE``. Here
a query is one ``SELECT`` (or ``WITH ... SELECT``) statement over the trace's own tables, and
no relation may be a call: in a ``FROM`` or ``JOIN`` list a name followed by ``(`` is refused,
whatever it is called, and so is any ``read_*(`` anywhere. The check reads tokens (strings,
quoted names and comments are skipped as polars' parser skips them), not the text, so
``read_csv/**/(`` or ``READ_CSV (`` do not get through.
"""

from __future__ import annotations

import re

from traceinsight.errors import UsageError

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    | (?P<string>'(?:[^']|'')*'?)
    | (?P<quoted>"(?:[^"]|"")*"?|`[^`]*`?|\[[^\]]*\]?)
    | (?P<word>[A-Za-z_][A-Za-z_0-9$]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Keywords that end a FROM list at the same depth.
_END_FROM = frozenset(
    ["where", "group", "having", "order", "limit", "offset", "union", "except", "intersect", "on", "using", "window", "qualify", "select", "fetch"]
)
_START = frozenset({"select", "with"})
# Words that may stand before "(" without being a call: `USING (col)`, `AS (SELECT ...)`, `IN (...)`.
_KEYWORDS = _END_FROM | frozenset(["from", "join", "as", "in", "exists", "lateral", "not", "and", "or", "any", "all", "values"])


def _tokens(query: str) -> list[tuple[str, str]]:
    """(kind, text) of each significant token: word (lower case), name (a quoted name,
    unquoted, lower case), string, or the character."""
    out: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(query):
        kind = match.lastgroup or "other"
        text = match.group()
        if kind in ("space", "comment"):
            continue
        if kind == "quoted":
            out.append(("name", text[1:-1].lower()))
        elif kind == "word":
            out.append(("word", text.lower()))
        else:
            out.append((kind, text))
    return out


def check_query(query: str, tables: tuple[str, ...]) -> None:
    """Raise ``UsageError`` unless ``query`` is one read-only SELECT that reads no file."""
    tokens = _tokens(query)
    while tokens and tokens[-1] == ("other", ";"):
        tokens.pop()
    first = next((t for t in tokens if t != ("other", "(")), None)
    if first is None or first[0] != "word" or first[1] not in _START:
        raise UsageError(f"only SELECT (or WITH ... SELECT) queries are run, over the tables {', '.join(tables)}")
    in_from: list[bool] = [False]  # per parenthesis depth: inside a FROM / JOIN list
    for i, (kind, text) in enumerate(tokens):
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if (kind, text) == ("other", ";"):
            raise UsageError("one statement per query")
        if (kind, text) == ("other", "("):
            in_from.append(False)
            continue
        if (kind, text) == ("other", ")"):
            if len(in_from) > 1:
                in_from.pop()
            continue
        if kind not in ("word", "name"):
            continue
        called = following == ("other", "(") and not (kind == "word" and text in _KEYWORDS)
        if called and (text.startswith("read_") or text.startswith("scan_") or in_from[-1]):
            raise UsageError(
                f"{text}(...): table functions are refused (they read files); query the tables "
                f"{', '.join(tables)}"
            )
        if kind == "word" and text in ("from", "join"):
            in_from[-1] = True
        elif kind == "word" and text in _END_FROM:
            in_from[-1] = False
