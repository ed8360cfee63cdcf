"""The HTML report in a real headless Chromium: loads without console errors, every chart renders.

A copy of the report gets a small probe script that measures each chart's rendered box and
writes the numbers into the DOM, which ``--dump-dom`` then returns; the report itself has no
JavaScript. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import traceinsight as ti
from traceinsight.analysis.report import analyze
from traceinsight.render.html.report import render_html

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
ARTIFACTS = ROOT / "test-artifacts"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

PROBE = """<script>
window.addEventListener('load', () => {
  const out = [...document.querySelectorAll('svg.chart')].map((s, i) => {
    const b = s.getBBox(); const r = s.getBoundingClientRect();
    return [i, s.getAttribute('aria-label'), s.querySelectorAll('rect,circle,polyline,line').length,
            Math.round(b.width), Math.round(b.height), Math.round(r.width), Math.round(r.height)].join('|');
  });
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = out.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    explicit = os.environ.get("TRACEINSIGHT_CHROMIUM")
    if explicit:
        return explicit
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("Chromium is required in CI for the HTML report test (apt-get install -y chromium)")
    pytest.skip("Chromium not found: install it (Debian: apt-get install -y chromium) or set TRACEINSIGHT_CHROMIUM")


def run_browser(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        chromium(),
        "--headless",
        "--no-sandbox",  # CI containers run as root
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={page.parent / 'chrome-profile'}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def console_messages(stderr: str) -> list[str]:
    """Every message the page wrote to the console (the report has no scripts, so any is wrong)."""
    return [line for line in stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]


def probe(page_html: str, tmp_path: Path) -> tuple[list[list[str]], list[str]]:
    copy = tmp_path / "probe.html"
    copy.write_text(page_html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    done = run_browser(copy, "--dump-dom", "--virtual-time-budget=5000")
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(r"<pre id=\"probe\">(.*?)</pre>", done.stdout, re.S)
    assert match, "probe output missing from the dumped DOM"
    rows = [line.split("|") for line in match.group(1).strip().splitlines() if line]
    return rows, console_messages(done.stderr)


def sample_html(name: str) -> str:
    path = SAMPLES / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"sample trace {path.name} not present")
    trace = ti.load(path, cache=False)
    return render_html(analyze(trace), trace)


@pytest.mark.parametrize("name", ["train_eager", "regimes", "dataloader_w0"])
def test_report_renders_every_chart_without_console_errors(name: str, tmp_path: Path) -> None:
    page_html = sample_html(name)
    assert "http://" not in page_html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page_html and "<script" not in page_html and "<link" not in page_html
    rows, messages = probe(page_html, tmp_path)
    assert messages == []
    labels = [r[1] for r in rows]
    assert "GPU timeline" in labels
    assert "device time breakdown" in labels
    for index, label, shapes, bw, bh, rw, rh in rows:
        assert int(shapes) > 0, f"chart {index} ({label}) has no marks"
        assert int(bw) > 0 and int(bh) > 0, f"chart {index} ({label}) has an empty bounding box"
        assert int(rw) > 100 and int(rh) > 10, f"chart {index} ({label}) is not laid out ({rw}x{rh})"


def test_screenshot_is_kept_as_artifact(tmp_path: Path) -> None:
    page = tmp_path / "train_eager.html"
    page.write_text(sample_html("train_eager"), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report_train_eager.png"
    shot.unlink(missing_ok=True)
    done = run_browser(page, f"--screenshot={shot}", "--window-size=1280,2400")
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_console_check_catches_a_script_error(tmp_path: Path) -> None:
    page_html = sample_html("tiny_kernels").replace(
        "</body>", "<script>throw new Error('deliberate failure');</script></body>"
    )
    _, messages = probe(page_html, tmp_path)
    assert any("deliberate failure" in m for m in messages)


def test_probe_catches_an_empty_chart(tmp_path: Path) -> None:
    page_html = sample_html("tiny_kernels")
    broken = re.sub(r"(<svg class='chart'[^>]*>).*?</svg>", r"\1</svg>", page_html, count=1, flags=re.S)
    rows, _ = probe(broken, tmp_path)
    assert rows[0][2] == "0" and rows[0][3] == "0"


def test_diff_page_renders(tmp_path: Path) -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    result = diff(SAMPLES / "amp_off.json.gz", SAMPLES / "amp_on.json.gz", label_before="amp_off", label_after="amp_on")
    page_html = render_diff_html(result)
    assert "faster" in page_html and "<script" not in page_html
    rows, messages = probe(page_html, tmp_path)
    assert messages == []
    labels = [r[1] for r in rows]
    assert labels[0] == "step times before and after" and labels.count("change chart") >= 3
    assert all(int(r[2]) > 0 and int(r[5]) > 100 for r in rows)
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "diff.html"
    page.write_text(page_html, encoding="utf-8")
    run_browser(page, f"--screenshot={ARTIFACTS / 'diff_amp.png'}", "--window-size=1280,2400")
