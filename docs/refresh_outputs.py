"""Refresh the pasted command output in the docs: ``python docs/refresh_outputs.py [PAGE.md ...]``.

A block to refresh is an HTML comment naming the command, right before a fenced code block:

    <!-- run: traceinsight analyze sample_traces/x.json.gz --only gaps | lines 1-30 -->
    ```
    (replaced by "$ <command>" and its output)
    ```

Commands run from the repository root with ``NO_COLOR=1`` and ``COLUMNS=100``; ``| lines A-B``
keeps only those output lines, ``| panels N`` the first N terminal panels. ``--check`` only verifies that every command still succeeds.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
PAGES = tuple(sorted(p.name for p in DOCS.glob("*.md") if "<!-- run:" in p.read_text(encoding="utf-8")))
BLOCK = re.compile(r"(<!-- run: (?P<cmd>.+?) -->\n```[a-z]*\n)(?P<body>.*?)(^```)", re.S | re.M)


def run(command: str) -> str:
    cmd, _, select = command.partition(" | ")
    argv = shlex.split(cmd)
    if argv[0] == "traceinsight":
        argv = [sys.executable, "-m", "traceinsight", *argv[1:]]
    env = dict(os.environ, NO_COLOR="1", COLUMNS="100", TERM="dumb")
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 3):
        raise RuntimeError(f"{cmd!r} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    lines = (done.stdout + done.stderr).rstrip().splitlines()
    if select.startswith("lines "):
        lo, _, hi = select.removeprefix("lines ").partition("-")
        lines = lines[int(lo) - 1 : int(hi)]
    elif select.startswith("panels "):
        # Keep the first N terminal panels (a panel ends with its bottom border).
        ends = [i for i, line in enumerate(lines) if line.startswith("╰")]
        wanted = int(select.removeprefix("panels "))
        lines = lines[: ends[wanted - 1] + 1] if len(ends) >= wanted else lines
    return "\n".join(line.rstrip() for line in [f"$ {cmd}", *lines])


def refresh(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + run(m.group("cmd")) + "\n" + m.group(4), text)


def commands(text: str) -> list[str]:
    return [m.group("cmd") for m in BLOCK.finditer(text)]


def main(argv: list[str]) -> int:
    pages = [a for a in argv if not a.startswith("--")] or list(PAGES)
    for page in pages:
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        if "--check" in argv:
            for command in commands(text):
                run(command)
            continue
        path.write_text(refresh(text), encoding="utf-8")
        print(f"Wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
