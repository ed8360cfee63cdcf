"""Screenshots of the HTML reports at desktop (1440 px) and laptop (1024 px) widths, kept in
``test-artifacts/`` for a person to look at; the test checks that each page lays out within the
window (no chart or table wider than the page)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_html_browser import ARTIFACTS, SAMPLES, run_browser, sample_html

WIDTHS = (1440, 1024)

WIDTH_PROBE = """<script>
window.addEventListener('load', () => {
  // Tables scroll inside their .scroll box by design; the boxes and charts must fit.
  const wide = [...document.querySelectorAll('svg.chart, .scroll, section')]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
    .map(e => e.tagName + ':' + (e.getAttribute('aria-label') || ''));
  const pre = document.createElement('pre'); pre.id = 'wide'; pre.textContent = wide.join('\\n');
  document.body.appendChild(pre);
});
</script>"""


def _shoot(page_html: str, stem: str, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / f"{stem}.html"
    page.write_text(page_html, encoding="utf-8")
    for width in WIDTHS:
        shot = ARTIFACTS / f"{stem}_{width}.png"
        shot.unlink(missing_ok=True)
        done = run_browser(page, f"--screenshot={shot}", f"--window-size={width},3200")
        assert done.returncode == 0, done.stderr[-2000:]
        assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        probe = tmp_path / f"{stem}_{width}_probe.html"
        probe.write_text(page_html.replace("</body>", WIDTH_PROBE + "</body>"), encoding="utf-8")
        dom = run_browser(probe, "--dump-dom", f"--window-size={width},3200", "--virtual-time-budget=5000")
        match = re.search(r"<pre id=\"wide\">(.*?)</pre>", dom.stdout, re.S)
        assert match is not None, "probe output missing"
        assert match.group(1).strip() == "", f"{stem} at {width} px: wider than the page: {match.group(1)}"


@pytest.mark.parametrize("name", ["train_eager", "regimes", "fix_tf32_before", "train_compiled"])
def test_analyze_page_screenshots(name: str, tmp_path: Path) -> None:
    _shoot(sample_html(name), f"analyze_{name}", tmp_path)


@pytest.mark.parametrize(("before", "after"), [("amp_off", "amp_on"), ("dataloader_w0", "dataloader_w4")])
def test_diff_page_screenshots(before: str, after: str, tmp_path: Path) -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    result = diff(SAMPLES / f"{before}.json.gz", SAMPLES / f"{after}.json.gz", label_before=before, label_after=after)
    _shoot(render_diff_html(result), f"diff_{before}_{after}", tmp_path)
