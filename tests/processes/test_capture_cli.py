"""`traceinsight capture -- python script.py`: an unmodified training script, in-process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_pynvml import install

from traceinsight.capture import counters as C
from traceinsight.capture.merge import read_trace
from traceinsight.capture.runner import run_script, split_command
from traceinsight.cli.app import main
from traceinsight.errors import CaptureError

SCRIPT = """
import sys
import torch

def train(steps):
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()

if __name__ == "__main__":
    steps, code = int(sys.argv[1]), sys.argv[2]
    train(steps)
    if code == "raise":
        raise RuntimeError("script failed")
    sys.exit(int(code))
"""

MANUAL = """
import torch
from traceinsight.capture import current_profiler

prof = current_profiler()
for _ in range(4):
    torch.randn(8, 8) @ torch.randn(8, 8)
    prof.step()
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    pytest.importorskip("torch")
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT))
    return path


def run_cli(args: list[str]) -> int:
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code or 0)


def step_names(path: Path) -> set[str]:
    return {
        e["name"]
        for e in read_trace(path)["traceEvents"]
        if str(e.get("name", "")).startswith("ProfilerStep#")
    }


def test_exit_code_and_steps(
    script: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    install(monkeypatch)
    out = tmp_path / "t.json.gz"
    rc = run_cli(["capture", "-o", str(out), "--no-nvml", "--", "python", str(script), "8", "3"])
    assert rc == 3
    # by default three steps run without the profiler (timed), one warms up, three are recorded
    assert step_names(out) == {"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"}
    timed = read_trace(out)["traceinsight"]["capture"]["unprofiled_steps"]
    assert timed["step"] == [0, 1, 2] and all(w > 0 for w in timed["wall_ns"])
    assert "trace written to" in capsys.readouterr().err


def test_script_without_python_and_with_schedule_options(script: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json.gz"
    rc = run_cli(
        [
            "capture",
            "-o",
            str(out),
            "--wait",
            "0",
            "--warmup",
            "1",
            "--active",
            "2",
            "--no-nvml",
            "--",
            str(script),
            "5",
            "0",
        ]
    )
    assert rc == 0
    assert step_names(out) == {"ProfilerStep#1", "ProfilerStep#2"}


def test_trace_written_when_script_raises(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json.gz"
    result = run_script(
        [str(script), "4", "raise"], output=out, wait=0, warmup=0, active=10, nvml=False
    )
    assert result.exit_code == 1
    assert result.paths == [out]
    assert "script failed" in capsys.readouterr().err
    assert "ProfilerStep#0" in step_names(out)


def test_argv_and_main_guard(script: Path, tmp_path: Path) -> None:
    saved = sys.argv[:]
    result = run_script(
        ["python", str(script), "3", "0"], output=tmp_path / "t.json.gz", nvml=False
    )
    assert result.exit_code == 0 and result.steps == 3
    assert sys.argv == saved


def test_too_few_steps_says_so(script: Path, tmp_path: Path) -> None:
    result = run_script([str(script), "1", "0"], output=tmp_path / "t.json.gz", wait=3, nvml=False)
    assert result.paths == []
    assert "no steps were recorded" in result.message and "made 1 optimizer steps" in result.message


def test_manual_steps_and_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    install(monkeypatch)
    from traceinsight.capture import nvml

    monkeypatch.setattr(nvml, "default_devices", lambda: [0])
    path = tmp_path / "manual.py"
    path.write_text(textwrap.dedent(MANUAL))
    result = run_script(
        [str(path)], output=tmp_path / "m.json.gz", steps_from="manual", wait=0, warmup=1, active=2
    )
    assert result.exit_code == 0 and result.steps == 4
    assert step_names(result.paths[0]) == {"ProfilerStep#1", "ProfilerStep#2"}
    assert read_trace(result.paths[0])[C.TRACE_META_KEY]["capture"]["nvml"] == "ok"
    assert result.summary is not None


def test_split_command() -> None:
    assert split_command(["--", "python3", "-m", "pkg.mod", "a"]) == ("module", "pkg.mod", ["a"])
    with pytest.raises(CaptureError, match="no script"):
        split_command(["python"])
    with pytest.raises(CaptureError, match="not found"):
        split_command(["python", "/nonexistent/train.py"])


def test_missing_script_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    rc = run_cli(["capture", "--", "python", "/nonexistent/train.py"])
    assert rc == 1
    assert "script not found" in capsys.readouterr().err


def test_help_imports_no_torch() -> None:
    code = (
        "import sys\n"
        "from traceinsight.cli.app import main\n"
        "main(['capture', '--help'])\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--steps-from" in out.stdout
    assert out.stdout.strip().endswith("False")


def test_capture_command_works_without_polars(script: Path, tmp_path: Path) -> None:
    # The command module on its own (a bare typer app stands in for the full CLI, whose other
    # commands are not this module's business) must run where polars is not installed.
    out = tmp_path / "np.json.gz"
    code = (
        "import sys, types, typer\n"
        "sys.modules['polars'] = None\n"
        "stub = types.ModuleType('traceinsight.cli.root')\n"
        "stub.app = typer.Typer()\n"
        "sys.modules['traceinsight.cli.root'] = stub\n"
        "import traceinsight.cli.capture\n"
        "assert 'torch' not in sys.modules\n"
        f"stub.app(['-o', {str(out)!r}, '--no-nvml', '--', {str(script)!r}, '5', '0'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "ProfilerStep#4" in step_names(out)
