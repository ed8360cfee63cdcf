"""``whatif --finding``: the changes of chosen findings replayed together, on the step the
findings are priced on. Checked against the findings' own prices (one finding alone gives back
what it lists alone) and against a fix that covers two findings, timed without the profiler."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import traceinsight as ti
from traceinsight.analysis.findings import FindingsResult
from traceinsight.cli.app import app, main
from traceinsight.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "sample_traces" / "models"
ATTENTION = MODELS / "model_attention_before.json.gz"


@functools.cache
def _findings(path: Path) -> FindingsResult:
    result = ti.analyze(path, only=["findings"]).sections["findings"]
    assert isinstance(result, FindingsResult)
    return result


def _alone(path: Path, finding: str) -> float:
    f = next(f for f in _findings(path).findings if f.id == finding)
    assert f.alone_pct is not None and f.method.startswith("replayed")
    return f.alone_pct


@pytest.mark.parametrize("finding", ["eager_attention", "host_sync"])
def test_one_finding_alone_gives_back_what_it_lists_alone(finding: str) -> None:
    # the same base (the step without the profiler), the same steps, the same change
    result = ti.whatif(ATTENTION, findings=[finding])
    assert result.findings == (finding,)
    assert "without the profiler" in result.before
    assert result.steady_saving_pct == pytest.approx(_alone(ATTENTION, finding), abs=0.05)


def test_a_fix_that_covers_two_findings_is_priced_by_both_together() -> None:
    # attn_implementation="sdpa" in Hugging Face GPT-2 fuses the attention and drops the
    # blocking copy of the eager path's mask (host_sync): timed without the profiler, 31.3 %
    rows = json.loads((MODELS / "model_timings.json").read_text())
    measured = float(next(r for r in rows if r["pair"] == "attention")["saving_pct"])
    both = ti.whatif(ATTENTION, findings=["host_sync", "eager_attention"]).steady_saving_pct
    fusion = _alone(ATTENTION, "eager_attention")
    assert fusion < measured / 1.5  # the finding alone misses the fix
    assert measured / 1.5 <= both <= measured * 1.5, (both, measured)
    assert both > max(fusion, _alone(ATTENTION, "host_sync"))


def test_a_finding_the_trace_does_not_have_is_named_with_the_ones_it_has() -> None:
    with pytest.raises(UsageError, match=r"no finding 'launch_overhead' in this trace \(its findings: eager_attention"):
        ti.whatif(ATTENTION, findings=["launch_overhead"])


def test_a_finding_priced_from_its_pool_is_said_to_be_left_out() -> None:
    listed = _findings(ATTENTION)
    pool = next(f for f in (*listed.findings, *listed.not_material) if f.id == "noncontiguous_copy")
    assert not pool.method.startswith("replayed")  # a device-time estimate, no change to replay
    result = ti.whatif(ATTENTION, findings=["noncontiguous_copy", "host_sync"])
    assert result.findings == ("host_sync",)
    assert any(n.startswith("noncontiguous_copy is priced from its pool") for n in result.notes)
    with pytest.raises(UsageError, match="has a change the replay can apply"):
        ti.whatif(ATTENTION, findings=["noncontiguous_copy"])


def test_the_command_takes_findings_and_says_what_before_is(capsys: pytest.CaptureFixture[str]) -> None:
    out = CliRunner().invoke(app, ["whatif", str(ATTENTION), "--finding", "eager_attention", "--finding", "host_sync", "-f", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)["whatif"]
    assert doc["findings"] == ["eager_attention", "host_sync"]  # rank order
    assert doc["before"].startswith("the step without the profiler")
    text = CliRunner().invoke(app, ["whatif", str(ATTENTION), "--finding", "eager_attention"], env={"COLUMNS": "160"})
    assert text.exit_code == 0 and "what if: the changes of eager_attention" in text.output
    assert "before: the step without the profiler" in text.output
    capsys.readouterr()
    assert main(["whatif", str(ATTENTION), "--finding", "nope"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: no finding 'nope' in this trace"), err
