"""The CLI starts without its heavy dependencies: capture runs where polars is absent."""

from __future__ import annotations

import subprocess
import sys

_BLOCK_POLARS = (
    "import sys; sys.modules['polars'] = None; sys.modules['msgspec'] = None; "
    "from traceinsight.cli.app import main; sys.exit(main({args!r}))"
)


def test_capture_help_works_without_polars() -> None:
    code = _BLOCK_POLARS.format(args=["capture", "--help"])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "capture" in done.stdout


def test_version_is_fast_and_needs_no_torch() -> None:
    code = "import sys; from traceinsight.cli.app import main; rc = main(['--version']); assert 'torch' not in sys.modules; sys.exit(rc)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("traceinsight ")
