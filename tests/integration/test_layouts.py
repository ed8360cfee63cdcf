"""Directory and glob inputs as profilers lay them out, recreated from the real sample traces
under the names the writers give them:

- ``torch.profiler.tensorboard_trace_handler``: ``<host>_<pid>.<time>.pt.trace.json[.gz]``,
  one file per profiler cycle;
- Lightning's ``PyTorchProfiler``: the same handler, writer names with ``[Strategy]`` in them;
- DDP: every rank's cycles, the rank in ``distributedInfo`` (the real two-rank NCCL pair).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

import traceinsight as ti
from tests.conftest import sample_path
from traceinsight.cli.app import main
from traceinsight.engine.job import load_job
from traceinsight.errors import UsageError
from traceinsight.trace.discover import JobDiscoveryError, expand
from traceinsight.trace.layout import discover, resolve

T0_MS = 1732500000123
LIGHTNING = "fit-[Strategy]DDPStrategy.training_step"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def put(sample: str, folder: Path, name: str, *, plain: bool = False) -> Path:
    """A copy of a sample trace under ``name`` (decompressed when ``plain``)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if plain:
        target.write_bytes(gzip.decompress(sample_path(sample).read_bytes()))
    else:
        shutil.copyfile(sample_path(sample), target)
    return target


def handler_name(writer: str, time_ms: int, gz: bool = True) -> str:
    return f"{writer}.{time_ms}.pt.trace.json" + (".gz" if gz else "")


def report_input(out: str) -> str:
    return str(json.loads(out)["inputs"]["trace"])


@pytest.fixture()
def cycles(tmp_path: Path) -> Path:
    """Two profiler cycles of one process; the later one written first, so that the order
    comes from the time in the names, not from the files' mtime."""
    logs = tmp_path / "logs"
    put("fix_pinned_after", logs, handler_name("host_1234", T0_MS + 5000))
    put("fix_pinned_before", logs, handler_name("host_1234", T0_MS))
    return logs


@pytest.fixture()
def ddp_cycles(tmp_path: Path) -> Path:
    """Two ranks (distributedInfo) by two profiler cycles, as DDP with a repeating schedule."""
    logs = tmp_path / "ddp"
    for cycle in range(2):
        for rank in range(2):
            put(f"ddp_train.rank{rank}", logs, handler_name(f"node0_{4000 + rank}", T0_MS + 1000 * cycle + rank))
    return logs


# --- one trace ----------------------------------------------------------------------------


def test_a_directory_or_glob_of_one_trace_is_that_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "logs"
    trace = put("fix_bmm_after", logs, handler_name("host_1234", T0_MS))
    for given in (str(logs), f"{logs}/*"):
        code, out, err = run(capsys, "analyze", given, "-f", "json")
        assert code == 0, err
        assert json.loads(out)["kind"] == "report" and report_input(out) == str(trace)


def test_a_lone_rank_trace_is_that_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # distributedInfo says rank 1 of 2; alone in its folder it is still one trace to analyse.
    put("ddp_train.rank1", tmp_path / "logs", handler_name("node0_4001", T0_MS))
    code, out, err = run(capsys, "analyze", str(tmp_path / "logs"), "-f", "json")
    assert code == 0, err
    assert json.loads(out)["kind"] == "report"


def test_lightning_names_with_brackets_are_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logs = tmp_path / "lightning_logs"
    trace = put("fix_bmm_after", logs, handler_name(LIGHTNING, T0_MS, gz=False), plain=True)
    assert expand(str(trace)) == [str(trace)]  # "[Strategy]" is not a character class here
    for given in (str(trace), str(logs), f"{logs}/*.pt.trace.json"):
        code, out, err = run(capsys, "analyze", given, "-f", "json")
        assert code == 0, err
        assert report_input(out) == str(trace)


# --- cycles of one process ------------------------------------------------------------------


def test_cycles_of_one_process_give_the_latest_with_a_note(cycles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latest = cycles / handler_name("host_1234", T0_MS + 5000)
    code, out, err = run(capsys, "analyze", str(cycles), "-f", "json")
    assert code == 0, err
    assert report_input(out) == str(latest)
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "2 profiler cycles of process host_1234" in notes[0]
    assert "the latest" in notes[0] and "--cycle" in notes[0]


def test_cycle_picks_another(cycles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    oldest = cycles / handler_name("host_1234", T0_MS)
    for choice in ("1", "-2"):
        code, out, err = run(capsys, "analyze", f"{cycles}/*", "--cycle", choice, "-f", "json")
        assert code == 0, err
        assert report_input(out) == str(oldest)
    assert load_job(cycles, engine="serial", cycle=1).spec.paths == [str(oldest)]


def test_cycle_all_compares_them_in_the_order_written(cycles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "analyze", str(cycles), "--cycle", "all", "--skip", "findings", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "series"
    text = json.dumps(doc)
    assert text.index(handler_name("host_1234", T0_MS)) < text.index(handler_name("host_1234", T0_MS + 5000))


@pytest.mark.parametrize("choice", ["3", "-3", "0", "newest"])
def test_a_cycle_that_is_not_there_is_a_usage_error(cycles: Path, capsys: pytest.CaptureFixture[str], choice: str) -> None:
    code, out, err = run(capsys, "analyze", str(cycles), "--cycle", choice)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and f"cycle {choice}" in err.replace("'", "") and "Traceback" not in err


def test_a_host_name_with_worker_in_it_is_not_a_rank(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    put("fix_pinned_before", logs, handler_name("gpu-worker3_77", T0_MS))
    put("fix_pinned_after", logs, handler_name("gpu-worker3_77", T0_MS + 10))
    layout = resolve(logs)
    assert layout.kind == "trace" and len(layout.cycles) == 2


def test_nanosecond_and_millisecond_names_order_together(tmp_path: Path) -> None:
    # Newer torch names files with time.time_ns(), older with ms; one folder can hold both.
    logs = tmp_path / "logs"
    in_ns = f"host_1.{(T0_MS - 1000) * 1_000_000}.pt.trace.json.gz"  # a second before the other
    put("fix_pinned_after", logs, handler_name("host_1", T0_MS))
    put("fix_pinned_before", logs, in_ns)
    assert [Path(c.paths[0]).name for c in resolve(logs).cycles] == [in_ns, handler_name("host_1", T0_MS)]


# --- the ranks of a job over cycles -------------------------------------------------------------


def test_ranks_by_cycles_give_the_latest_cycle_as_a_job(ddp_cycles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = resolve(ddp_cycles)
    assert layout.kind == "job" and len(layout.cycles) == 2
    assert [[Path(p).name for p in c.paths] for c in layout.cycles] == [
        [handler_name("node0_4000", T0_MS), handler_name("node0_4001", T0_MS + 1)],
        [handler_name("node0_4000", T0_MS + 1000), handler_name("node0_4001", T0_MS + 1001)],
    ]
    code, out, err = run(capsys, "analyze", str(ddp_cycles), "--engine", "serial", "--only", "rank_table", "-f", "json")
    assert code == 0, err
    assert json.loads(out)["kind"] == "job"
    assert "2 profiler cycles of 2 ranks" in err
    spec = discover(ddp_cycles, cycle=1)
    assert spec.paths == [str(p) for p in layout.cycles[0].paths] and spec.warnings


def test_ranks_with_different_numbers_of_cycles_are_named(ddp_cycles: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ddp_cycles / handler_name("node0_4001", T0_MS + 1001)).unlink()
    code, out, err = run(capsys, "analyze", str(ddp_cycles))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "rank 0: 2, rank 1: 1" in err


# --- not traces, mixes ------------------------------------------------------------------------


def test_a_directory_of_other_json_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hparams.json").write_text('{"lr": 0.001, "batch_size": 32}')
    (tmp_path / "metrics.json").write_text("[1, 2, 3]")
    code, out, err = run(capsys, "analyze", str(tmp_path))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "no trace among 2" in err and "no rank" not in err
    assert "hparams.json: not a trace" in err and "metrics.json: not a trace" in err


def test_other_json_next_to_a_trace_is_left_out_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = put("fix_bmm_after", tmp_path, handler_name("host_1234", T0_MS))
    (tmp_path / "hparams.json").write_text('{"lr": 0.001}')
    code, out, err = run(capsys, "analyze", str(tmp_path), "-f", "json")
    assert code == 0, err
    assert report_input(out) == str(trace) and "hparams.json: not a trace" in err


def test_a_mix_is_refused_in_one_line_that_lists_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put("fix_pinned_before", tmp_path, handler_name("host_1234", T0_MS))
    put("ddp_train.rank0", tmp_path, "ddp_train.rank0.json.gz")
    (tmp_path / "hparams.json").write_text('{"lr": 0.001}')
    code, out, err = run(capsys, "analyze", str(tmp_path))
    assert code == 1 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    for name in ("ddp_train.rank0.json.gz", handler_name("host_1234", T0_MS), "hparams.json"):
        assert name in err


def test_two_processes_without_ranks_are_listed(tmp_path: Path) -> None:
    put("fix_pinned_before", tmp_path, handler_name("host_1234", T0_MS))
    put("fix_pinned_after", tmp_path, handler_name("host_1234", T0_MS + 9))
    put("fix_bmm_after", tmp_path, handler_name("host_5678", T0_MS + 5))
    with pytest.raises(JobDiscoveryError) as info:
        resolve(tmp_path)
    assert "host_1234 (2 cycles); host_5678 (1 cycle)" in str(info.value)


def test_an_unreadable_gzip_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / handler_name("host_1234", T0_MS)).write_bytes(b"\x1f\x8b\x08\x00garbage")
    code, _, err = run(capsys, "analyze", str(tmp_path))
    assert code == 1 and err.count("\n") == 1 and "not a readable gzip file" in err


# --- the same from Python -----------------------------------------------------------------------


def test_load_takes_a_folder_of_cycles_with_a_warning(cycles: Path) -> None:
    with pytest.warns(UserWarning, match=r"2 profiler cycles of process host_1234 .* cycle=N"):
        latest = ti.load(cycles, cache=False)
    assert latest.meta.path == str(cycles / handler_name("host_1234", T0_MS + 5000))
    with pytest.warns(UserWarning, match="analysing cycle 1"):
        assert ti.load(f"{cycles}/*", cycle=1, cache=False).meta.path == str(cycles / handler_name("host_1234", T0_MS))


def test_load_points_a_job_folder_to_load_job(ddp_cycles: Path) -> None:
    with pytest.raises(UsageError, match=r"ranks of a job.*load_job"):
        ti.load(ddp_cycles)
