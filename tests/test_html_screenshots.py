"""Screenshots of the HTML reports at desktop (1440 px), laptop (1024 px) and phone (390 px)
widths, kept in ``test-artifacts/`` for a person to look at; the test checks that each page lays
out within the window (no chart or table wider than the page, nothing scrolls the page sideways),
that no value is squeezed to a letter or two a line, and that charts stay readable on a phone
(they scroll inside their card rather than shrink)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_html_browser import ARTIFACTS, SAMPLES, run_browser, sample_html

WIDTHS = (1440, 1024, 390)

WIDTH_PROBE = """<script>
window.addEventListener('load', () => {
  // Tables and charts scroll inside their box (.scroll, figure) by design; the boxes must fit.
  const wide = [...document.querySelectorAll('figure, .scroll, section, .verdict')]
    .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
    .map(e => e.tagName + ':' + (e.getAttribute('aria-label') || ''));
  if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) wide.push('page scrolls sideways');
  // A value wrapped a letter or two a line ("NVI/DIA/H20/0"): a text box far narrower than its words.
  for (const e of document.querySelectorAll('dd, td, li, p, h1, h2, h3')) {
    const text = e.textContent.trim();
    const r = e.getBoundingClientRect();
    if (text.length >= 4 && r.width > 0 && r.width < 48 && r.height > 40) wide.push('squeezed:' + text.slice(0, 30));
  }
  for (const e of document.querySelectorAll('svg.chart')) {
    if (e.getBoundingClientRect().width < 340) wide.push('chart too small to read:' + (e.getAttribute('aria-label') || ''));
  }
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


def test_compare_and_job_page_screenshots(tmp_path: Path) -> None:
    from traceinsight.api import analyze, compare, load_job
    from traceinsight.render.formats import render

    series = compare([SAMPLES / "fix_tf32_before.json.gz", SAMPLES / "fix_tf32_after.json.gz"])
    _shoot(render(series, "html"), "compare_fix_tf32", tmp_path)
    job = analyze(load_job([SAMPLES / f"job_straggler.rank{i}.json.gz" for i in range(4)]))
    _shoot(render(job, "html"), "job_straggler", tmp_path)


def test_diff_page_opens_with_its_verdict_and_cards() -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    page = render_diff_html(diff(SAMPLES / "amp_off.json.gz", SAMPLES / "amp_on.json.gz"))
    body = page.split("<body", 1)[1]
    verdict, first_card, facts = body.find("class='verdict'"), body.find("<section"), body.find("<dl class='facts'>")
    assert 0 <= verdict < first_card < facts, (verdict, first_card, facts)
    assert "<dt>bound: basis</dt><dd></dd>" not in page
