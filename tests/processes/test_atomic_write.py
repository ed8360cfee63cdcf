"""Atomic writes replace plain files only: links stay links, devices and pipes are written to."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import sample_path
from traceinsight.atomic import open_atomic, write_atomic
from traceinsight.capture.merge import write_bytes_atomic


def test_a_link_stays_a_link_and_its_file_is_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic("new", link)
    assert link.is_symlink() and link.read_text() == "new" == real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("writer", ["write_atomic", "capture"])
def test_a_pipe_is_written_to_not_replaced(writer: str, tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_bytes()), daemon=True)
    reader.start()
    if writer == "write_atomic":
        write_atomic("through the pipe", pipe)
    else:
        write_bytes_atomic(b"through the pipe", pipe, gz=False)
    reader.join(timeout=10)
    assert received == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), open_atomic(target) as handle:
        handle.write(b"half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_analyze_writes_to_dev_stdout_without_force() -> None:
    # GIVEN output asked for on /dev/stdout (a pipe here)
    # WHEN analyze writes JSON there
    out = subprocess.run(
        [sys.executable, "-m", "traceinsight", "analyze", str(sample_path("tiny_kernels")),
         "--only", "overview", "-f", "json", "-o", "/dev/stdout"],
        capture_output=True, text=True, timeout=120,
    )
    # THEN the document is all that stdout holds (no --force asked for, no "Wrote" line mixed in)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["overview"]
