"""Notebook API: results and reports display as HTML; the docs notebook runs end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

import traceinsight as ti
from traceinsight.analysis.registry import ANALYSES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_report_and_results_render_in_jupyter(sample_trace: Any) -> None:
    report = ti.analyze(sample_trace("regimes"))
    page = report._repr_html_()
    assert report.headline.verdict.split(";")[0] in page.replace("&#x27;", "'")
    for spec in ANALYSES:
        assert spec.title in page.replace("&amp;", "&")
        result = report[spec.name]
        fragment = result._repr_html_()
        assert fragment.startswith("<div class='ti-nb'>") and spec.title in fragment.replace("&amp;", "&")
        frame = result.to_polars()
        assert isinstance(frame, pl.DataFrame)
        assert isinstance(result.to_pandas(), pd.DataFrame)
    assert "<svg" in report.bound._repr_html_()  # the roofline plot comes along
    assert "<svg" in report.breakdown._repr_html_()


def test_unavailable_result_says_why(sample_trace: Any) -> None:
    report = ti.analyze(sample_trace("dataloader_w0"), only=["memory"])
    assert not report.memory.available
    assert "Not available" in report.memory._repr_html_()


def test_trace_frames_for_notebooks(sample_trace: Any) -> None:
    t = sample_trace("gemm_bf16")
    assert isinstance(t.to_pandas("kernels"), pd.DataFrame)
    assert t.sql("SELECT count(*) AS n FROM kernels")["n"][0] == t.kernels.height


def test_docs_notebook_executes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(DOCS / "notebook.ipynb", as_version=4)
    monkeypatch.setenv("TRACEINSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(DOCS)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in outputs if o.output_type == "execute_result" and "text/html" in o.get("data", {})]
    assert any("ti-nb" in h and "<svg" in h for h in html), "the bound section should display with its roofline"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "GPU" in printed  # the verdict
