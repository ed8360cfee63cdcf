"""``load_job`` called from a script without a main guard and from stdin: the pool's
workers must not run the user's code again (nor look for a script that is not there), and a
job of which no rank loaded says so in one line instead of failing later inside polars."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, sample_path
from traceinsight.engine.job import FailedRank, Job, JobLoadError, load_job
from traceinsight.trace.layout import discover

# No main guard, on purpose: the workers would run all of it again if they re-ran __main__.
SCRIPT = """
import traceinsight as ti
print("script body ran", flush=True)
job = ti.load_job({folder!r}, jobs=2)
print("ranks", job.ranks, "failed", [f.error for f in job.failed])
print(job.sql("select rank, count(*) as n from kernels group by rank order by rank").to_dicts())
"""


@pytest.fixture()
def ddp_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    for rank in range(2):
        shutil.copyfile(sample_path(f"ddp_train.rank{rank}"), folder / f"node0_{4000 + rank}.1732500000123.pt.trace.json.gz")
    return folder


def _python(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def _check(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("script body ran") == 1, done.stdout
    assert "ranks [0, 1] failed []" in done.stdout
    assert "{'rank': 0, 'n': " in done.stdout and "{'rank': 1, 'n': " in done.stdout


def test_a_script_without_a_main_guard(ddp_folder: Path, tmp_path: Path) -> None:
    script = tmp_path / "analyse_job.py"
    script.write_text(SCRIPT.format(folder=str(ddp_folder)))
    _check(_python([str(script)], cwd=tmp_path))


def test_a_script_from_stdin(ddp_folder: Path, tmp_path: Path) -> None:
    _check(_python(["-"], cwd=tmp_path, stdin=SCRIPT.format(folder=str(ddp_folder))))


def test_no_rank_loaded_is_one_clear_error(tmp_path: Path) -> None:
    for rank in range(2):
        # Heads that are a trace's (so discovery takes them), bodies cut short.
        (tmp_path / f"j.rank{rank}.json").write_text('{"traceEvents": [ {"ph": "X", "ts": ')
    with pytest.raises(JobLoadError) as info:
        load_job(tmp_path, jobs=2)
    text = str(info.value)
    assert "\n" not in text and text.startswith("no rank of j could be loaded")
    assert "rank 0:" in text and "j.rank0.json" in text and "concat" not in text


def test_a_job_with_no_rank_refuses_queries_clearly(tmp_path: Path) -> None:
    (tmp_path / "j.rank0.json").write_text('{"traceEvents": [')
    spec = discover(tmp_path)
    job = Job(spec=spec, summaries=(), failed=(FailedRank(0, spec.paths[0], "not valid JSON"),))
    with pytest.raises(JobLoadError, match=r"no rank of j could be loaded: rank 0: .*not valid JSON"):
        job.sql("select * from kernels")


def _ranks_in_a_daemon(folder: str) -> list[int]:
    return load_job(folder, jobs=2).ranks


def test_a_daemonic_worker_analyses_the_ranks_itself(ddp_folder: Path) -> None:
    # A multiprocessing.Pool worker is daemonic and may not start processes of its own.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_ranks_in_a_daemon, (str(ddp_folder),)) == [0, 1]
