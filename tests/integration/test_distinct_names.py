"""Names that differ never read the same once shortened: in terminal tables (laid out or
stacked), Markdown and HTML, at 80 and 200 columns."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from tests.conftest import sample_path
from traceinsight.analysis.report import analyze
from traceinsight.render.fit import Col, FitTable, shorten_distinct, shorten_middle
from traceinsight.render.formats import render
from traceinsight.render.html.page import table_html
from traceinsight.render.sections.kernels import kernel_label

GEMMS = [
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(Params)",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_tn_align1>(Params)",
    "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(Params)",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
    "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize256x128x8_stage3_warpsize4x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
]
# Samples with many similar kernels: fp32 and bf16 GEMMs, elementwise copies, optimizer kernels.
SAMPLES = ("train_eager", "regimes", "fix_tf32_before", "amp_on", "elementwise", "fix_optimizer_before")


@pytest.mark.parametrize("width", [12, 20, 30, 45, 60])
def test_shorten_distinct_keeps_differing_names_apart(width: int) -> None:
    # The plain middle cut makes some of them read the same; the column-wise cut never does.
    cut = shorten_distinct(GEMMS, width)
    assert len(set(cut)) == len(GEMMS), cut
    assert all(len(c) <= width for c in cut)


def test_the_plain_cut_collides() -> None:
    assert len({shorten_middle(n, 30) for n in GEMMS}) < len(GEMMS)


def test_same_names_stay_the_same() -> None:
    assert shorten_distinct(["abc" * 30, "abc" * 30], 20) == [shorten_middle("abc" * 30, 20)] * 2


def names_shown(table: FitTable, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, color_system=None).print(table)
    lines = buf.getvalue().splitlines()
    if lines[0].startswith("name"):  # laid out: the first cell of every row after the header
        return [re.split(r"\s{2,}", line.strip())[0] for line in lines[1:]]
    return [line for line in lines if not line.startswith(" ")]  # stacked: the heads


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("width", [80, 200])
def test_kernel_names_of_a_sample_read_apart(name: str, width: int, sample_trace) -> None:  # type: ignore[no-untyped-def]
    report = analyze(sample_trace(name), only=["kernels"])
    labels = sorted({kernel_label(n) for n in report.kernels.kernels["name"].to_list()})
    table = FitTable([Col("name", "name"), Col("calls"), Col("total")], [(n, "1,000", "10.00 ms") for n in labels])
    shown = names_shown(table, width)
    assert len(shown) == len(labels) and len(set(shown)) == len(labels), shown
    # And in the section as the report prints it: no kernel row twice.
    text = render(report, "terminal", width=width)
    rows = [line for line in text.splitlines() if re.search(r"gemm|elementwise|kernel", line)]
    heads = [re.split(r"\s{2,}", line.strip("│ "))[0] for line in rows if not line.startswith("│   ")]
    duplicated = {h for h in heads if heads.count(h) > 1 and len(h) > 20}
    assert not duplicated, duplicated


@pytest.mark.parametrize("name", SAMPLES)
def test_html_and_markdown_cells_read_apart(name: str, sample_trace) -> None:  # type: ignore[no-untyped-def]
    report = analyze(sample_trace(name), only=["kernels"])
    names = report.kernels.kernels["name"].to_list()
    html = table_html(["name"], [[n] for n in names])
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert len(set(cells)) == len(set(names))
    md = render(report, "md")
    summaries = re.findall(r"<summary><code>(.*?)</code></summary>", md)
    assert len(summaries) == len(set(summaries))


def test_diff_kernel_rows_read_apart() -> None:
    before, after = sample_path("fix_tf32_before"), sample_path("fix_tf32_after")
    import traceinsight as ti

    result = ti.diff(before, after)
    for width in (80, 200):
        text = render(result, "terminal", width=width)
        rows = [re.split(r"\s{2,}", line.strip("│ "))[0] for line in text.splitlines() if ("gone" in line or "new" in line)]
        rows = [r for r in rows if len(r) > 20]
        assert len(rows) == len(set(rows)), rows
    md = render(result, "md")
    names = re.findall(r"^\| `([^`]*)`", md, re.M)
    assert len(names) == len(set(names)), names


def test_names_are_cut_where_words_start() -> None:
    # "ate…n::_scaled_do…" and "(no a…otation)" read as nothing; whole words read.
    assert shorten_middle("aten::_scaled_dot_product_attention", 16) == "aten::…attention"
    assert shorten_middle("ampere_sgemm_128x64_nn_kernel_with_long_suffix", 30) == "ampere_sgemm_…with_long_suffix"
    # one word longer than the room (a hash): shown by its start, as short hashes are
    assert shorten_middle("x" * 50, 12) == "xxxxxxxxxxx…"
