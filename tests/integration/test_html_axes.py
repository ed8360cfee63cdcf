"""HTML details a browser test would not name: counters on the timeline's axis, prose cells
never cut, names cut apart."""

from __future__ import annotations

import re

from traceinsight.analysis.report import analyze
from traceinsight.render.html.counters import counter_figures
from traceinsight.render.html.page import is_prose, table_html
from traceinsight.render.html.timeline import timeline_window


def test_counters_share_the_timeline_axis(sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("train_eager")
    first = int(trace.counters["ts_ns"].min())
    last = int(trace.counters["ts_ns"].max())
    # A window starting as long before the first sample as the samples span: the first
    # sample is drawn half-way along the axis, not at its start.
    window = (first - (last - first), last)
    figure = counter_figures(trace, window)[0]
    xs = [float(x) for x in re.findall(r"<circle cx='([\d.]+)'", figure.svg)]
    left, width, right = 56, 900, 10
    middle = left + (width - left - right) / 2
    assert abs(min(xs) - middle) < 3, (min(xs), middle)
    assert "since the trace window start" in figure.svg


def test_the_report_page_uses_the_window(sample_trace) -> None:  # type: ignore[no-untyped-def]
    trace = sample_trace("train_eager")
    report = analyze(trace, only=["overview"])
    assert timeline_window(report, trace) == (report.overview.window_start_ns, report.overview.window_end_ns)


def test_prose_cells_are_whole_and_names_apart() -> None:
    prose = "Kernels are shorter than their launches: the GPU waits for the CPU to launch work (1 %)"
    names = ["void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1_with_a_long_tail>(Params)",
             "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_tn_align1_with_a_long_tail>(Params)"]
    assert is_prose(prose) and not any(is_prose(n) for n in names)
    assert not is_prose("at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<...> >")
    html = table_html(["what"], [[prose], *[[n] for n in names]])
    assert f"<td class='prose'>{prose}</td>" in html
    cells = re.findall(r"<td[^>]* title='[^']*'>(.*?)</td>", html)
    assert len(cells) == 2 and cells[0] != cells[1]
