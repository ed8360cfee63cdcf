"""Golden outputs: every command on a few small samples, in each format it writes, compared
byte for byte with the files committed under ``tests/data/golden/``.

This pins what users read (terminal text at the kind's fixed width, the JSON envelope, the
Markdown and the HTML page) so that a change to how documents are dispatched, rendered or
resolved cannot change an output unnoticed. A change that is meant to change output
regenerates the files and shows up in review as their diff::

    PYTHONPATH=. python tests/integration/test_golden.py          # rewrite tests/data/golden/

Only what is truly not the same from run to run or machine to machine is normalised before
comparing: the package version (in the JSON header and the HTML footer) and the checkout's
absolute path (the commands are run from the checkout's root with relative paths, so it only
appears if an output names a resolved path). Nothing in these outputs carries a wall-clock
timestamp; if one appears, the comparison fails and it must be normalised here, by name.
The Perfetto file is binary: it is compared by its SHA-256 (recorded in ``export.pftrace.sha256``).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import io
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data" / "golden"
S = "sample_traces/"
BEFORE, AFTER = S + "fix_pinned_before.json.gz", S + "fix_pinned_after.json.gz"
FOUR = (".txt", ".json", ".md", ".html")

# name -> (command line, suffixes of -o; None: the command prints to stdout, one run per --format)
CASES: dict[str, tuple[list[str], tuple[str, ...] | None]] = {
    "analyze": (["analyze", BEFORE], FOUR),
    "job": (["analyze", S + "ddp_train.rank0.json.gz", S + "ddp_train.rank1.json.gz", "--engine", "serial"], FOUR),
    "diff": (["diff", BEFORE, AFTER], FOUR),
    "compare": (["compare", BEFORE, AFTER, "--engine", "serial"], FOUR),
    "gaps": (["gaps", BEFORE, "--limit", "12"], None),
    "bound": (["bound", BEFORE, "--by", "kernel"], None),
    "compile": (["compile", S + "train_compiled_with_compile.json.gz"], (".txt", ".json")),
    "whatif": (["whatif", S + "whatif/whatif_sync_half_gpu.json.gz", "--remove", "cudaStreamSynchronize"], (".txt", ".json")),
    "memory": (["memory", S + "memory/handmade_train_oom.pickle"], FOUR),
    "sql": (["sql", BEFORE, "select name, count(*) as n from kernels group by name order by n desc, name limit 5"], (".txt", ".json", ".csv")),
    "export": (["export", BEFORE], (".pftrace",)),
}
STDOUT_FORMATS = ("terminal", "json")
SUFFIX_OF = {"terminal": ".txt", "json": ".json"}


@contextlib.contextmanager
def _environment(cache: Path) -> Iterator[None]:
    """The checkout's root as the working directory, a fixed terminal width, no colour."""
    saved_env = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR", "TRACEINSIGHT_CACHE_DIR", "FORCE_COLOR")}
    cwd = Path.cwd()
    os.environ.update(COLUMNS="100", NO_COLOR="1", TRACEINSIGHT_CACHE_DIR=str(cache))
    os.environ.pop("FORCE_COLOR", None)
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(cwd)
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def normalise(data: bytes) -> bytes:
    """Take out what differs between runs or machines: the version and the checkout's path."""
    from traceinsight.version import __version__

    version = re.escape(__version__.encode())
    data = data.replace(str(ROOT).encode(), b"<root>")
    return re.sub(rb'("traceinsight_version": "|traceinsight )' + version, rb"\1<version>", data)


def produce(name: str, workdir: Path) -> dict[str, bytes]:
    """Every output of case ``name``, by golden file name (``analyze.md``)."""
    from traceinsight.cli.app import main

    args, suffixes = CASES[name]
    outputs: dict[str, bytes] = {}
    with _environment(workdir / "cache"):
        if suffixes is None:
            for fmt in STDOUT_FORMATS:
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    code = main([*args, "--format", fmt])
                assert code == 0, f"{name} -f {fmt} exited {code}"
                outputs[f"{name}{SUFFIX_OF[fmt]}"] = buf.getvalue().encode()
            return outputs
        for suffix in suffixes:
            path = workdir / f"{name}{suffix}"
            with contextlib.redirect_stdout(io.StringIO()):  # "Wrote PATH"
                code = main([*args, "-o", str(path), "--force"])
            assert code == 0, f"{name} -o {path.name} exited {code}"
            data = path.read_bytes()
            if suffix == ".pftrace":
                outputs[f"{name}{suffix}.sha256"] = (hashlib.sha256(data).hexdigest() + "\n").encode()
            else:
                outputs[f"{name}{suffix}"] = data
    return {key: normalise(value) for key, value in outputs.items()}


def _first_difference(expected: bytes, actual: bytes, label: str) -> str:
    diff = difflib.unified_diff(
        expected.decode(errors="replace").splitlines(),
        actual.decode(errors="replace").splitlines(),
        f"golden/{label}",
        "now",
        lineterm="",
        n=2,
    )
    return "\n".join(list(diff)[:40])


@pytest.mark.parametrize("name", list(CASES))
def test_command_output_matches_golden(name: str, tmp_path: Path) -> None:
    produced = produce(name, tmp_path)
    expected_files = sorted(p.name for p in GOLDEN.glob(f"{name}.*"))
    assert expected_files == sorted(produced), f"golden files of {name}: {expected_files}, produced {sorted(produced)}"
    for label, actual in produced.items():
        expected = (GOLDEN / label).read_bytes()
        assert actual == expected, (
            f"{label} differs from its golden file; if the change is meant, regenerate with "
            f"`PYTHONPATH=. python tests/integration/test_golden.py`\n{_first_difference(expected, actual, label)}"
        )


def regenerate() -> None:
    import tempfile

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for old in GOLDEN.iterdir():
        old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            for label, data in produce(name, Path(tmp)).items():
                (GOLDEN / label).write_bytes(data)
                print(f"wrote {GOLDEN.relative_to(ROOT) / label} ({len(data):,} bytes)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    regenerate()
