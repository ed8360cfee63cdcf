"""The terminal output at 60, 80, 100 and 200 columns never cuts a number.

For every bundled sample (``analyze``) and for ``diff``, ``compile`` and ``bound`` outputs: no
line is wider than the terminal, no ellipsis touches a digit, and every figure with a unit that
the 200-column output prints is printed, whole, at every narrower width too.
"""

from __future__ import annotations

import functools
import re

import pytest
from rich.text import Text

from tests.analyses import analysed
from tests.conftest import _load_sample, sample_names, sample_path
from traceinsight.render.fit import Col, FitTable, shorten_middle
from traceinsight.render.report_documents import terminal_text

WIDTHS = (60, 80, 100, 200)
FIGURE = re.compile(
    r"(?<![\w.,])[−+-]?\d[\d,]*(?:\.\d+)? ?(?:ns|µs|ms|s|%|B|KiB|MiB|GiB|TiB|TFLOP/s|TB/s)(?![\w/])"
)
CUT = re.compile(r"\d…|…\d|…\s?(?:ns|µs|ms|%|KiB|MiB|GiB)\b")


def _flat(text: str) -> str:
    """The text without panel borders and with every run of blanks as one space, so a figure
    that a prose line wrapped before its unit still counts as printed."""
    return re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", text))


def check_widths(render: functools.partial[str] | object) -> None:
    outputs = {w: render(width=w) for w in WIDTHS}  # type: ignore[operator]
    wide = set(FIGURE.findall(_flat(outputs[200])))
    assert wide, "no figure found in the 200-column output"
    for width, text in outputs.items():
        for line in text.splitlines():
            assert len(line) <= width, f"{width} columns: line too long: {line!r}"
            assert not CUT.search(line), f"{width} columns: a number is cut: {line!r}"
        missing = wide - set(FIGURE.findall(_flat(text)))
        assert not missing, f"{width} columns: figures missing: {sorted(missing)[:8]}"


@functools.cache
def _report(name: str):  # type: ignore[no-untyped-def]
    return analysed(sample_path(name))


@pytest.mark.parametrize("name", sample_names())
def test_analyze_never_cuts_a_number(name: str) -> None:
    report = _report(name)
    check_widths(functools.partial(terminal_text, report))


@pytest.mark.parametrize(
    ("before", "after"),
    [("dataloader_w0", "dataloader_w4"), ("amp_off", "amp_on"), ("fix_tf32_before", "fix_tf32_after"), ("train_eager", "train_compiled")],
)
def test_diff_never_cuts_a_number(before: str, after: str) -> None:
    from traceinsight.api import diff

    result = diff(_load_sample(before), _load_sample(after))
    check_widths(functools.partial(terminal_text, result))


@pytest.mark.parametrize("name", ["train_compiled", "train_compiled_with_compile", "train_cudagraphs"])
def test_compile_never_cuts_a_number(name: str) -> None:
    from traceinsight.render.documents import CompileReport

    result = _report(name).sections["compile"]
    check_widths(functools.partial(terminal_text, CompileReport(name, result)))  # type: ignore[arg-type]


@pytest.mark.parametrize("by", ["region", "op", "kernel"])
def test_bound_never_cuts_a_number(by: str) -> None:
    from traceinsight.render.documents import BoundListing

    result = _report("train_eager").sections["bound"]
    check_widths(functools.partial(terminal_text, BoundListing("train_eager", result, by, 3)))  # type: ignore[arg-type]


def test_the_check_catches_a_cut_number() -> None:
    """The old Bound table cut "77.16 ms" to "77.16…": the check must fail on that."""
    with pytest.raises(AssertionError):
        check_widths(lambda width: "window 77.16 ms" if width == 200 else "window 77.16…")


def test_names_are_shortened_in_the_middle_never_next_to_a_digit() -> None:
    name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"
    short = shorten_middle(name, 40)
    assert len(short) <= 40 and "…" in short
    assert short.startswith("sm90_xmma") and short.endswith("kernel__5x_cublas")
    assert not CUT.search(short)


def test_a_table_too_wide_stacks_one_record_per_block() -> None:
    table = FitTable(
        [Col("kernel", "name"), *(Col(f"figure {i}") for i in range(8))],
        [("a_very_long_kernel_name_that_matters", *(f"{i}.25 ms" for i in range(8)))],
    )
    from rich.console import Console

    console = Console(width=60, record=True, no_color=True)
    with console.capture() as cap:
        console.print(table)
    lines = cap.get().splitlines()
    assert lines[0] == "a_very_long_kernel_name_that_matters"
    assert all(len(line) <= 60 for line in lines)
    assert all(f"figure {i} {i}.25 ms" in cap.get() for i in range(8))


def test_a_table_that_fits_keeps_figures_whole_and_shortens_names() -> None:
    table = FitTable([Col("op", "name"), Col("time")], [("x" * 30 + "_tail", "12.34 ms"), (Text("short"), "1 ns")])
    from rich.console import Console

    console = Console(width=30, no_color=True)
    with console.capture() as cap:
        console.print(table)
    out = cap.get()
    assert "12.34 ms" in out and "…tail" in out
    assert all(len(line) <= 30 for line in out.splitlines())
