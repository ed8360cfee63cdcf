"""Every command's ``--format json`` writes the same envelope; renderers read real fields.

The hand-made traces come from ``tests/handmade.py`` (written by hand, not recorded).
"""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sample_path
from tests.handmade import op, write_trace
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.report import analyze
from traceinsight.analysis.runner import run_one
from traceinsight.analysis.sections.steps import STEP_SCHEMA
from traceinsight.cli.app import main
from traceinsight.render import envelope, formats
from traceinsight.render.documents import BoundListing, CompileReport, GapsListing
from traceinsight.render.html.figures import STEP_PARTS
from traceinsight.trace.loader import load

HEADER = ["schema_version", "traceinsight_version", "kind", "inputs", "options", "sections"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main([*args, "--format", "json"]) in (0, 3)
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("report", ["analyze", "regimes", "--only", "gaps,bound"]),
        ("gaps", ["gaps", "regimes"]),
        ("bound", ["bound", "regimes"]),
        ("compile", ["compile", "train_compiled"]),
        ("sql", ["sql", "gemm_bf16", "SELECT count(*) AS n FROM kernels"]),
    ],
)
def test_every_command_writes_the_one_envelope(capsys: pytest.CaptureFixture[str], kind: str, args: list[str]) -> None:
    path = str(sample_path(args[1]))
    data = _json(capsys, args[0], path, *args[2:])
    assert list(data)[: len(HEADER)] == HEADER
    assert (data["schema_version"], data["kind"]) == (envelope.ENVELOPE_SCHEMA_VERSION, kind)
    assert data["inputs"] == {"trace": path}
    for name in data["sections"]:
        assert name in data


def test_diff_envelope_names_both_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    before, after = str(sample_path("amp_off")), str(sample_path("amp_on"))
    data = _json(capsys, "diff", before, after)
    assert list(data)[: len(HEADER)] == HEADER
    assert (data["kind"], data["inputs"], data["sections"]) == ("diff", {"before": before, "after": after}, ["diff"])
    assert data["diff"]["verdict"] in ("faster", "slower", "no_significant_change")


def test_report_envelope_keeps_the_report_payload(sample_trace: Any) -> None:
    report = analyze(sample_trace("dataloader_w0"), only=["overview", "gaps"])
    data = envelope.document(report)
    body = report.to_dict()
    assert data["sections"] == body["sections"] == ["overview", "gaps"]
    for key in ("result_schema_version", "config", "headline", "overview", "gaps"):
        assert data[key] == body[key]
    assert "trace" not in data and data["inputs"]["trace"] == report.trace_path


def test_json_header_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "report.md").read_text(encoding="utf-8")
    for key in HEADER:
        assert f"`{key}`" in doc
    for kind in typing.get_args(envelope.Kind):
        assert f"`{kind}`" in doc


def test_formats_refuse_what_a_kind_cannot_do(sample_trace: Any) -> None:
    from traceinsight.analysis.sections import compile as compile_analysis
    from traceinsight.errors import UsageError

    trace = sample_trace("train_compiled")
    doc = CompileReport(trace.meta.path, compile_analysis.run(trace, AnalysisConfig()))
    with pytest.raises(UsageError, match="compile cannot be written as html"):
        formats.render(doc, "html")
    with pytest.raises(UsageError, match="choose from terminal, json"):
        formats.check("gaps", "md")


def test_write_is_atomic_and_keeps_the_usual_mode(tmp_path: Path, sample_trace: Any) -> None:
    from traceinsight.analysis.sections import gaps

    trace = sample_trace("tiny_kernels")
    result = gaps.run(trace, AnalysisConfig())
    target = tmp_path / "gaps.json"
    formats.write(GapsListing(trace.meta.path, result, result.gaps), "json", target)
    assert json.loads(target.read_text())["kind"] == "gaps"
    assert [p.name for p in tmp_path.iterdir()] == ["gaps.json"]  # no temporary left behind
    probe = tmp_path / "probe"
    probe.write_text("")
    assert target.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777


def test_bound_listing_text(sample_trace: Any) -> None:

    trace = sample_trace("regimes")
    text = formats.render(BoundListing(trace.meta.path, run_one(trace, "bound", AnalysisConfig()), "kernel", 5), "terminal")
    assert "Bound by kernel" in text


# ---- renderers read fields that exist ---------------------------------------------------------


def test_step_chart_parts_are_step_columns() -> None:
    assert {c for c, _ in STEP_PARTS} <= set(STEP_SCHEMA)


def test_diff_renderers_read_existing_kernel_count_keys(sample_trace: Any) -> None:
    import re

    from traceinsight.analysis.diff.compare import DiffOptions, diff_traces

    result = diff_traces(sample_trace("amp_off"), sample_trace("amp_on"), DiffOptions(n_boot=200))
    render_dir = Path(formats.__file__).parent
    read = set()
    # Every format reads the kernel counts through the diff's format-neutral view.
    read |= set(re.findall(r"kc\.get\([\"']([a-z_]+)[\"']", (render_dir / "diff" / "view.py").read_text(encoding="utf-8")))
    assert read and read <= set(result.kernel_counts)
    # The HTML page's change charts read their columns by name.
    from traceinsight.render.diff.html import CHARTED, diff_tables

    tables = dict(diff_tables(result))
    assert {"breakdown", "ops", "kernels"} <= set(tables)
    for title, frame in tables.items():
        if title in CHARTED:
            name, delta = CHARTED[title]
            assert {name, delta or "before_ns_per_step", "before_ns_per_step", "after_ns_per_step"} <= set(frame.columns), title


def test_bound_roofline_reads_existing_peak_keys(sample_trace: Any) -> None:

    result = run_one(sample_trace("gemm_bf16"), "bound", AnalysisConfig())
    assert result.peaks is not None
    assert isinstance(result.peaks["mem_bw_tbps"], float) and isinstance(result.peaks["tflops"], dict)


def test_ops_chart_on_a_cpu_only_trace_ranks_host_time(tmp_path: Path) -> None:
    """Fixed bug: without GPU work the operator chart was left out (it ranked GPU time, all 0)."""
    trace = load(write_trace(tmp_path / "cpu_only.json", [op("aten::add", 0, 10), op("aten::mul", 12, 5)]), cache=False)
    page = formats.render(analyze(trace), "html", trace=trace)
    assert "Top operators by host time" in page


# ---- the public API -----------------------------------------------------------------------------


def test_import_is_light_and_exports_resolve() -> None:
    code = (
        "import sys, traceinsight as ti; assert 'polars' not in sys.modules, 'polars'; "
        "[getattr(ti, n) for n in ti.__all__]; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_public_signatures_have_no_any() -> None:
    import traceinsight.api as api

    for fn in (api.load, api.analyze, api.diff):
        for name, annotation in fn.__annotations__.items():
            assert "Any" not in str(annotation), (fn.__name__, name)


def test_api_accepts_paths_and_registers_display(tmp_path: Path) -> None:
    import traceinsight as ti

    report = ti.analyze(sample_path("tiny_kernels"), only=["overview"])
    assert isinstance(report, ti.Report)
    assert report._repr_html_().startswith("<div class='ti-nb'>")
    from traceinsight.analysis.core import display

    assert display.render("report_markdown", report).startswith("# traceinsight report")


def test_display_names_a_missing_renderer() -> None:
    from traceinsight.analysis.core import display
    from traceinsight.errors import TraceInsightError

    with pytest.raises(TraceInsightError, match="no nothing view registered"):
        display.render("nothing", object())
