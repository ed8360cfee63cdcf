"""A job analysis is its module, its view and a registry line, like a trace analysis: this adds
one (``rank_steps``: the steps each rank recorded) to a copy of the package and shows it with
``analyze`` of a job in every format, through the one view registry and the one JSON envelope."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "traceinsight"
SAMPLES = PACKAGE.parent / "sample_traces"

ANALYSIS = '''
"""The steps each rank recorded."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import polars as pl

from traceinsight.analysis.core.base import AnalysisConfig, Inputs, Result
from traceinsight.analysis.job.base import JobAnalysisSpec
from traceinsight.analysis.job.summary import RankSummary


@dataclass(frozen=True)
class RankStepsResult(Result):
    name: ClassVar[str] = "rank_steps"
    per_rank: pl.DataFrame = field(default_factory=pl.DataFrame)

    def to_polars(self) -> pl.DataFrame:
        return self.per_rank


def run(summaries: Sequence[RankSummary], config: AnalysisConfig, inputs: Inputs) -> RankStepsResult:
    rows = [{"rank": s.rank, "steps": s.steps.height} for s in summaries]
    return RankStepsResult(per_rank=pl.DataFrame(rows))


SPEC = JobAnalysisSpec(name="rank_steps", title="Steps per rank", run=run, description="Steps each rank recorded.", kind="job")
'''

VIEW = '''
from traceinsight.analysis.job.rank_steps import RankStepsResult
from traceinsight.render import views
from traceinsight.render.views import Table


def tables(result: RankStepsResult) -> list[Table]:
    rows = [(str(r["rank"]), f"{r['steps']} steps") for r in result.per_rank.iter_rows(named=True)]
    return [Table("Steps recorded per rank", ("rank", "recorded"), rows, "counted by rank_steps")]


views.register(RankStepsResult, tables=tables)
'''


def _package_with_the_analysis(tmp_path: Path) -> None:
    copy = tmp_path / "traceinsight"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "analysis" / "job" / "rank_steps.py").write_text(ANALYSIS, encoding="utf-8")
    (copy / "render" / "sections" / "rank_steps.py").write_text(VIEW, encoding="utf-8")
    specs = copy / "analysis" / "job" / "specs.py"
    text = specs.read_text(encoding="utf-8")
    anchor = "from traceinsight.analysis.job.base import JobAnalysisSpec\n"
    entry = "SPECS = (\n"
    assert anchor in text and entry in text
    text = text.replace(anchor, anchor + "from traceinsight.analysis.job import rank_steps\n")  # the import
    specs.write_text(text.replace(entry, entry + "    rank_steps.SPEC,\n"), encoding="utf-8")  # the entry


def test_a_new_job_analysis_is_a_module_a_view_and_a_registry_line(tmp_path: Path) -> None:
    _package_with_the_analysis(tmp_path)
    ranks = [str(SAMPLES / f"ddp_train.rank{r}.json.gz") for r in (0, 1)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "120", "TRACEINSIGHT_CACHE_DIR": str(tmp_path / "cache")}

    def analyze(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "traceinsight", "analyze", *ranks, "--engine", "serial", "--only", "rank_steps,rank_table", *args],
            env=env, capture_output=True, text=True, check=False, cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    terminal = " ".join(analyze("-f", "terminal").split())  # a narrow table wraps its title
    assert "Steps recorded per rank" in terminal and "counted by rank_steps" in terminal
    assert terminal.index("Steps recorded per rank") < terminal.index("Ranks (per step)")  # SPECS order
    envelope = json.loads(analyze("-f", "json"))
    assert envelope["kind"] == "job" and "rank_steps" in envelope["sections"]
    assert [row["rank"] for row in envelope["rank_steps"]["per_rank"]] == [0, 1]
    assert all(row["steps"] > 0 for row in envelope["rank_steps"]["per_rank"])
    markdown = analyze("-f", "md")
    assert "## Steps recorded per rank" in markdown and "steps |" in markdown
    page = analyze("-f", "html")
    assert "<h2>Steps recorded per rank</h2>" in page
    helped = subprocess.run(
        [sys.executable, "-m", "traceinsight", "analyze", "--help"], env=env, capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert "rank_steps" in helped.stdout  # --only lists the job registry's sections
