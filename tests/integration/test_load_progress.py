"""Loading reports its progress (bytes read and decoded, events) to whoever listens."""

from __future__ import annotations

import io

from rich.console import Console

from tests.conftest import sample_path
from traceinsight.render import progress as display
from traceinsight.trace.loader import load
from traceinsight.trace.progress import reporting


def test_the_reader_reports_bytes_and_events() -> None:
    seen: list[tuple[str, int, int, int]] = []
    with reporting(lambda *args: seen.append(args)):
        trace = load(sample_path("train_eager"), cache=False)
    phases = [s[0] for s in seen]
    assert "reading" in phases and "decoding" in phases
    decoding = [s for s in seen if s[0] == "decoding"]
    assert decoding[-1][1] == decoding[-1][2]  # all bytes decoded at the end
    assert decoding[-1][3] >= trace.events.height > 0
    assert all(0 <= done <= total for _, done, total, _ in seen)


def test_no_listener_no_report() -> None:
    load(sample_path("tiny_kernels"), cache=False)  # must not fail without a callback


def test_progress_shows_only_on_a_terminal(tmp_path) -> None:  # type: ignore[no-untyped-def]
    big = sample_path("train_eager")
    assert not display.wants_progress(big, io.StringIO(), min_bytes=0)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert display.wants_progress(big, Tty(), min_bytes=0)
    assert not display.wants_progress(big, Tty())  # a small file: no display


def test_the_display_counts_events_with_a_rate(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert display.events_text(0, 1.0) == ""
    assert display.events_text(1_500_000, 3.0) == "1,500,000 events (500,000/s)"
    monkeypatch.setattr(
        "traceinsight.render.terminal.make_console",
        lambda **kw: Console(file=io.StringIO(), force_terminal=True, width=120),
    )
    with display.phases(True) as phase, display.loading(phase):
        load(sample_path("train_eager"), cache=False)
        phase("analysing")
