"""Every answer within a size cap: a table gives fewer rows and the offset of the next ones;
any other answer too long for the cap gives its JSON text in parts, each with a continuation
that the ``more`` tool reads."""

from __future__ import annotations

import json
import secrets
import threading
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, Field

from traceinsight.errors import UsageError

# Assistants read answers into a context window of a few hundred thousand tokens; 40,000
# characters (~10,000 tokens) leaves room for the question and several answers.
DEFAULT_MAX_CHARS = 40_000
# Continuations kept (the oldest are forgotten first): each holds one answer's text.
KEPT_ANSWERS = 32


class Page(BaseModel):
    """Which rows of a table this answer holds."""

    offset: int = Field(description="index of the first row returned")
    returned: int = Field(description="rows in this answer")
    total: int = Field(description="rows that matched, before the limit")
    next_offset: int | None = Field(description="offset to ask for the next rows; null at the end")


class Answer(BaseModel):
    """What every tool returns."""

    kind: str = Field(description="what the answer is: open, verdict, section, sql, kernels, diff, compare, whatif, memory, more")
    handle: str | None = Field(default=None, description="the loaded trace, job or snapshot the answer is about")
    data: dict[str, Any] | None = Field(
        default=None,
        description="the answer, in the layout of traceinsight's JSON report (each section's to_dict()); "
        "null when the answer was over the size cap: then read `text` and `continuation`",
    )
    rows: list[dict[str, Any]] | None = Field(default=None, description="table rows (sql, kernels, a section's table)")
    page: Page | None = Field(default=None, description="which rows `rows` holds, and the offset of the next ones")
    text: str | None = Field(default=None, description="a part of the answer's JSON text, when the whole was over the size cap")
    continuation: str | None = Field(default=None, description="pass to the `more` tool for the next part of `text`; null at the end")
    notes: list[str] = Field(default_factory=list, description="what was cut, estimated or could not be answered")


def size(answer: Answer) -> int:
    return len(answer.model_dump_json(exclude_none=True))


class Shaper:
    """Cuts answers to ``max_chars`` and keeps the rest of long ones for ``more``."""

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self, answer: Answer, rows: list[dict[str, Any]], *, offset: int, total: int) -> Answer:
        """``answer`` with as many of ``rows`` (from ``offset`` of ``total``) as fit."""
        count = len(rows)
        shaped = self._with_rows(answer, rows, offset, total, count)
        if size(shaped) > self.max_chars and count > 1:
            low, high = 1, count - 1  # the largest count that fits, by bisection
            while low < high:
                mid = (low + high + 1) // 2
                if size(self._with_rows(answer, rows, offset, total, mid)) <= self.max_chars:
                    low = mid
                else:
                    high = mid - 1
            shaped = self._with_rows(answer, rows, offset, total, low)
            shaped.notes.append(f"cut to {low} of the {count} rows asked for, to stay under {self.max_chars} characters; ask again from next_offset")
        return self.document(shaped)

    @staticmethod
    def _with_rows(answer: Answer, rows: list[dict[str, Any]], offset: int, total: int, count: int) -> Answer:
        end = offset + count
        page = Page(offset=offset, returned=count, total=total, next_offset=end if end < total else None)
        return answer.model_copy(update={"rows": rows[:count], "page": page, "notes": list(answer.notes)})

    def document(self, answer: Answer) -> Answer:
        """``answer`` whole, or the first part of its JSON text with a continuation."""
        if size(answer) <= self.max_chars:
            return answer
        text = json.dumps(answer.model_dump(include={"data", "rows", "page"}, exclude_none=True), allow_nan=False)
        token = secrets.token_hex(6)
        with self._lock:
            self._texts[token] = text
            while len(self._texts) > KEPT_ANSWERS:
                self._texts.popitem(last=False)
        note = (
            f"the answer is {len(text)} characters, over the cap of {self.max_chars}: `text` holds "
            "its JSON in parts; call `more` with `continuation` for the next part (or ask for less: "
            "a section, a filter, a smaller limit)"
        )
        return self.part(Answer(kind=answer.kind, handle=answer.handle, notes=[*answer.notes, note]), token, 0)

    def part(self, answer: Answer, token: str, start: int) -> Answer:
        with self._lock:
            text = self._texts.get(token)
        if text is None:
            raise UsageError(f"continuation {token!r} is unknown or expired (the server keeps the last {KEPT_ANSWERS} long answers): ask again")
        budget = max(1000, self.max_chars - 2000)  # room for the fields around the text
        # JSON-escaping can lengthen the part; shrink until the answer fits.
        end = min(len(text), start + budget)
        while True:
            chunk = text[start:end]
            more = f"{token}:{end}" if end < len(text) else None
            shaped = answer.model_copy(update={"text": chunk, "continuation": more})
            if size(shaped) <= self.max_chars or end - start <= 100:
                return shaped
            end = start + (end - start) * 3 // 4

    def more(self, continuation: str) -> Answer:
        token, _, start = continuation.partition(":")
        if not start.isdigit():
            raise UsageError(f"continuation {continuation!r} is not one this server gave")
        return self.part(Answer(kind="more"), token, int(start))
