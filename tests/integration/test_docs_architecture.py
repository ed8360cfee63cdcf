"""The architecture page's example analysis runs as written, through the real runner."""

from __future__ import annotations

import re
import sys
import textwrap
import types
from pathlib import Path

import traceinsight as ti
from traceinsight.analysis.core.base import AnalysisConfig
from traceinsight.analysis.runner import compute_inputs

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_example_analysis_runs_on_a_sample() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)\n *```", text, re.S)
    assert code is not None
    module = types.ModuleType("docs_architecture_example")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(textwrap.dedent(code.group(1)), "architecture.md", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__

    trace = ti.load(ROOT / "sample_traces" / "dataloader_w0.json.gz", cache=False)
    config = AnalysisConfig()
    inputs = compute_inputs(trace, config, ("gaps",))
    result = namespace["run"](trace, config, inputs)  # type: ignore[operator]
    gaps = inputs.get("gaps", ti.GapsResult)
    assert result.available
    assert result.to_polars().height == gaps.gaps.filter(gaps.gaps["dur_ns"] > 1_000_000).height
    assert result.to_polars().height > 0  # data loading leaves gaps of tens of ms
    assert result.to_dict()["schema_version"] >= 1
