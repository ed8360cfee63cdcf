"""The HTML report in a real headless Chromium: loads without console errors, every chart renders.

A copy of the report gets a small probe script that measures each chart's rendered box and
writes the numbers into the DOM, which the test then reads; the report itself has no
JavaScript. Screenshots go to ``test-artifacts/``. The module starts one Chromium and opens each
page in a tab of its own (tests/chromium.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import traceinsight as ti
from tests.analyses import analysed
from tests.chromium import Browser, Page
from traceinsight.render.html.report import render_html

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_traces"
ARTIFACTS = ROOT / "test-artifacts"

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


def screenshot(browser: Browser, page: Path, shot: Path, width: int, height: int) -> None:
    """A PNG of ``page`` in a ``width`` x ``height`` window, as ``--screenshot`` takes it."""
    shot.unlink(missing_ok=True)
    with Page(browser, page, width, height) as tab:
        tab.screenshot(shot)


def probe(browser: Browser, page_html: str, tmp_path: Path) -> tuple[list[list[str]], list[str]]:
    """The probe's rows for each chart, and every console message of the page; in an 800x600
    window, headless Chromium's default."""
    copy = tmp_path / "probe.html"
    copy.write_text(page_html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with Page(browser, copy, 800, 600) as tab:
        dom = tab.dom_when("#probe")
        messages = tab.console
    match = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom, re.S)
    assert match, "probe output missing from the dumped DOM"
    rows = [line.split("|") for line in match.group(1).strip().splitlines() if line]
    return rows, messages


def sample_html(name: str) -> str:
    path = SAMPLES / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"sample trace {path.name} not present")
    # The run's one analysis of the sample (tests/analyses.py); the plots draw from the trace.
    return render_html(analysed(path), ti.load(path))


@pytest.mark.parametrize("name", ["train_eager", "regimes", "dataloader_w0"])
def test_report_renders_every_chart_without_console_errors(name: str, browser: Browser, tmp_path: Path) -> None:
    page_html = sample_html(name)
    assert "http://" not in page_html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page_html and "<script" not in page_html and "<link" not in page_html
    rows, messages = probe(browser, page_html, tmp_path)
    assert messages == []
    labels = [r[1] for r in rows]
    assert "GPU timeline" in labels
    assert "device time breakdown" in labels
    for index, label, shapes, bw, bh, rw, rh in rows:
        assert int(shapes) > 0, f"chart {index} ({label}) has no marks"
        assert int(bw) > 0 and int(bh) > 0, f"chart {index} ({label}) has an empty bounding box"
        assert int(rw) > 100 and int(rh) > 10, f"chart {index} ({label}) is not laid out ({rw}x{rh})"


def test_screenshot_is_kept_as_artifact(browser: Browser, tmp_path: Path) -> None:
    page = tmp_path / "train_eager.html"
    page.write_text(sample_html("train_eager"), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report_train_eager.png"
    screenshot(browser, page, shot, 1280, 2400)
    assert shot.exists() and shot.stat().st_size > 20_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_console_check_catches_a_script_error(browser: Browser, tmp_path: Path) -> None:
    page_html = sample_html("tiny_kernels").replace(
        "</body>", "<script>throw new Error('deliberate failure');</script></body>"
    )
    _, messages = probe(browser, page_html, tmp_path)
    assert any("deliberate failure" in m for m in messages)


def test_probe_catches_an_empty_chart(browser: Browser, tmp_path: Path) -> None:
    page_html = sample_html("tiny_kernels")
    broken = re.sub(r"(<svg class='chart'[^>]*>).*?</svg>", r"\1</svg>", page_html, count=1, flags=re.S)
    rows, _ = probe(browser, broken, tmp_path)
    assert rows[0][2] == "0" and rows[0][3] == "0"


def test_diff_page_renders(browser: Browser, tmp_path: Path) -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    result = diff(SAMPLES / "amp_off.json.gz", SAMPLES / "amp_on.json.gz", label_before="amp_off", label_after="amp_on")
    page_html = render_diff_html(result)
    assert "faster" in page_html and "<script" not in page_html
    rows, messages = probe(browser, page_html, tmp_path)
    assert messages == []
    labels = [r[1] for r in rows]
    assert labels[0] == "step times before and after" and labels.count("change chart") >= 3
    assert all(int(r[2]) > 0 and int(r[5]) > 100 for r in rows)
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "diff.html"
    page.write_text(page_html, encoding="utf-8")
    screenshot(browser, page, ARTIFACTS / "diff_amp.png", 1280, 2400)
