"""Names are cut between words, never inside one, and names of a column keep what differs.

The check of printed reports is independent of the cutting code: every run of letters and
digits that touches an ellipsis must, somewhere in the trace's own names, stand at a word's
edge (a separator, the name's end or a camel-case hump beside it), or be the start of a word
longer than the cutter's long-word limit (a hash, shown by its start).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import polars as pl
import pytest

from tests.analyses import analysed
from tests.conftest import _load_sample, sample_path
from traceinsight.render.cut import (
    LONG_WORD,
    shorten,
    shorten_distinct,
    shorten_end,
    shorten_middle,
)

THIRD_PARTY = Path(__file__).resolve().parents[2].parent / "shared" / "third_party"
FX_GRAPHS = [
    "## Call CompiledFxGraph v6blbfmwwonu52dvevbsmlh743q5tkclrt4gcqpzea ##",
    "## Call CompiledFxGraph fy3autahubfajmd6bxxyn6lu7kvkzp5igodlkqby7dz ##",
    "## Call CompiledFxGraph phl2ptbacyoatld26amllbw44zkgnirgqvqi4ce6dk ##",
]
NAMES = [
    "(no annotation)",
    "aten::_foreach_mul_",
    "aten::_scaled_dot_product_efficient_attention",
    "autograd::engine::evaluate_function: CompiledFunctionBackward",
    "OutputGraph.call_user_compiler (dynamo_timed)",
    "Torch-Compiled Region: 0/0",
    "TorchDynamo Cache Lookup",
    "_compile.compile_inner (dynamo_timed)",
    "triton_red_fused__log_softmax_nll_loss_forward_scalar_tensor_view_where_0",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >",
    *FX_GRAPHS,
]
WORD = re.compile(r"[A-Za-z0-9]+")


def _hump(name: str, i: int) -> bool:
    """A camel-case hump before ``name[i]``: fxGraph, AOTDispatcher (AOT|Dispatcher)."""
    a, b = name[i - 1], name[i]
    acronym_ends = a.isupper() and b.isupper() and i + 1 < len(name) and name[i + 1].islower()
    return (a.islower() and b.isupper()) or acronym_ends


def _edge_after(name: str, end: int) -> bool:
    """Whether ``name`` may end a kept head at ``end`` without cutting a word."""
    return end >= len(name) or not name[end].isalnum() or _hump(name, end)


def _edge_before(name: str, start: int) -> bool:
    return start == 0 or not name[start - 1].isalnum() or _hump(name, start)


def _whole_word_cut(short: str, names: list[str]) -> str | None:
    """None when every ellipsis of ``short`` stands between whole words of some name of
    ``names``; else the fragment that is part of a word."""
    for m in re.finditer("…", short):
        left = re.search(r"[A-Za-z0-9]+$", short[: m.start()])
        right = re.match(r"[A-Za-z0-9]+", short[m.end() :])
        if left:
            run = left.group()
            ok = any(
                _edge_after(n, k + len(run))
                or any(
                    len(w.group()) > LONG_WORD and w.start() <= k
                    for w in WORD.finditer(n)
                    if w.end() > k
                )
                for n in names
                for k in (i.start() for i in re.finditer(re.escape(run), n))
            )
            if not ok:
                return run + "…"
        if right:
            run = right.group()
            ok = any(
                _edge_before(n, i.start()) for n in names for i in re.finditer(re.escape(run), n)
            )
            if not ok:
                return "…" + run
    return None


@pytest.mark.parametrize("width", range(8, 40))
def test_a_name_is_cut_between_words(width: int) -> None:
    for name in NAMES:
        short = shorten_middle(name, width)
        assert len(short) <= width, (name, short)
        assert _whole_word_cut(short, [name]) is None, (name, width, short)


def test_cuts_read_as_words() -> None:
    assert shorten_middle("(no annotation)", 12) == "…annotation)"
    assert shorten_middle("PythonDispatchMode", 12) == "Python…Mode"
    assert shorten_middle("TorchDynamo Cache Lookup", 12) == "Torch…Lookup"
    # A number is one word: never "1.1…" for 1.137.
    assert "1.1…" not in shorten_middle("step 1.137 s of the longest window", 12)
    # A hash longer than any word is shown by its start, as short hashes are.
    assert shorten_end("v6blbfmwwonu52dvevbsmlh743q5tkclrt4gcqpzea", 10) == "v6blbfmww…"
    assert shorten_middle("x" * 50, 12) == "xxxxxxxxxxx…"


@pytest.mark.parametrize("width", [10, 12, 16, 24, 32, 48])
def test_graph_names_that_differ_in_their_hash_keep_it(width: int) -> None:
    cut = shorten_distinct(FX_GRAPHS, width)
    assert len(set(cut)) == len(FX_GRAPHS), cut
    for short, name in zip(cut, FX_GRAPHS, strict=True):
        digest = name.split()[3]
        assert len(short) <= width
        # The start of the hash, the part these names differ in, is shown.
        assert re.search(r"(?:^|…| )" + re.escape(digest[:4]), short), (width, short)
        assert _whole_word_cut(short, [name]) is None, short


def test_the_kept_part_stays_whole_where_it_fits() -> None:
    name = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize256x64x8_stage3_warpsize2x2x1_ffma_aligna4_execute_kernel"
    start = name.index("tilesize")
    short = shorten(name, 40, (start + 8, start + 14))
    assert "tilesize256x64x8" in short and len(short) <= 40, short
    assert short.startswith("sm80") and short.count("…") == 2, short


@functools.cache
def _names(path: str) -> list[str]:
    trace = _load_sample(path) if "/" not in path else _load_path(path)
    names = {"(no annotation)"}
    for frame in (trace.events, trace.kernels):
        names |= set(frame.select(pl.col("name").cast(pl.Utf8)).to_series().drop_nulls().to_list())
    return sorted(names)


def _load_path(path: str):  # type: ignore[no-untyped-def]
    from traceinsight.trace.loader import load

    return load(Path(path), cache=False)


def _rendered(path: str, width: int) -> str:
    from traceinsight.render.documents import CompileReport
    from traceinsight.render.report_documents import terminal_text

    report = _report(path)
    text = terminal_text(report, width=width)
    return text + terminal_text(CompileReport(path, report.sections["compile"]), width=width)


@functools.cache
def _report(path: str):  # type: ignore[no-untyped-def]
    return analysed(sample_path(path) if "/" not in path else path)


TRACES = ["train_compiled", "train_compiled_with_compile", "train_with_stack"]
if (THIRD_PARTY / "tracelens" / "torch_compile_triton.json.gz").exists():
    TRACES.append(str(THIRD_PARTY / "tracelens" / "torch_compile_triton.json.gz"))


@pytest.mark.parametrize("path", TRACES)
def test_printed_reports_cut_names_between_words(path: str) -> None:
    names = _names(path)
    for width in (60, 64, 68, 72, 76, 80):
        for line in _rendered(path, width).splitlines():
            bad = _whole_word_cut(line.strip("│ "), names)
            assert bad is None, f"{width} columns: {bad!r} cuts a word in {line!r}"
