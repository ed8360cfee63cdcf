"""The Markdown report reads well pasted into a pull request."""

from __future__ import annotations

import functools
import re

from tests.analyses import analysed
from tests.conftest import sample_path
from traceinsight.render.markdown import name_cell


@functools.cache
def _md(name: str) -> str:
    return analysed(sample_path(name)).to_markdown()


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_no_raw_clock_values_or_enums() -> None:
    md = _md("train_eager")
    assert "**origin**" not in md
    assert not re.search(r"\d{6,}\.\d+ s", md), "an absolute clock value leaked"
    assert "device type" not in md and "device index" not in md
    memory = _section(md, "Memory")
    header = next(line for line in memory.splitlines() if line.startswith("| device"))
    assert header.count("peak allocated |") == 1


def test_shares_are_percentages() -> None:
    breakdown = _section(_md("train_eager"), "Device time breakdown")
    assert "97.1 %" in breakdown and "0.971" not in breakdown


def test_operators_show_gpu_time() -> None:
    ops = _section(_md("train_eager"), "Operators")
    assert "gpu total" in ops and "gpu self" in ops


def test_long_names_are_shortened_with_the_full_name_a_click_away() -> None:
    kernels = _section(_md("train_eager"), "Kernels")
    assert "<details><summary>" in kernels
    for cell in re.findall(r"<summary><code>(.*?)</code></summary>", kernels):
        assert len(cell) <= 60 + 20  # html escapes make it longer than the 60 characters shown
    full = "void at::native::elementwise_kernel<128, 2, float>(int, float*)" * 3
    cell = name_cell(full)
    assert "&lt;128, 2, float&gt;" in cell and cell.count("<details>") == 1
    assert name_cell("aten::mm") == "`aten::mm`"
