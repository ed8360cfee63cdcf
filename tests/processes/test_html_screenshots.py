"""Screenshots of the HTML reports at desktop (1440 and 1280 px), laptop (1024 px) and phone
(390 px) widths, kept in ``test-artifacts/`` for a person to look at; the test checks that each page lays
out within the window (no chart or table wider than the page, nothing scrolls the page sideways),
that no value is squeezed to a letter or two a line or runs out of its cell, that tables fit
their cards whole at 1440 px, and that chart text stays readable on a phone: at least 9 px high
as drawn (charts scroll inside their card rather than shrink), labels apart and inside the chart,
and that a verdict is said once (no bullet repeating its paragraph). One Chromium serves the
module's pages (the ``browser`` fixture), each page in a tab of its own."""

from __future__ import annotations

import re
from html import escape, unescape
from pathlib import Path

import pytest

from tests.chromium import Browser, Page
from tests.processes.test_html_browser import ARTIFACTS, SAMPLES, sample_html, screenshot

WIDTHS = (1440, 1280, 1024, 390)

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
  // A cell's text running on into its neighbours' (a long word in a cell that does not cut).
  for (const c of document.querySelectorAll('td, th')) {
    if (getComputedStyle(c).overflowX === 'visible' && c.scrollWidth > c.clientWidth + 1) wide.push('spills out of its cell:' + c.textContent.slice(0, 30));
  }
  // The verdict is said once: a bullet that repeats the paragraph's words fills a phone's
  // first screen twice over.
  for (const v of document.querySelectorAll('.verdict')) {
    const said = (v.querySelector('p') || {textContent: ''}).textContent;
    for (const li of v.querySelectorAll('li')) {
      const words = li.textContent.trim();
      if (words.length > 20 && said.includes(words.slice(0, 40))) wide.push('verdict repeated:' + words.slice(0, 30));
    }
  }
  // On a desktop a table fits its card whole, without scrolling.
  if (window.innerWidth >= 1440) {
    for (const e of document.querySelectorAll('.scroll')) {
      if (e.scrollWidth > e.clientWidth + 1) wide.push('table wider than its card:' + e.textContent.slice(0, 30));
    }
  }
  // Chart text as a person sees it: SVG text scales with its chart, so a chart shrunk to a
  // phone's width draws its 11-unit labels a few pixels high. Labels must also stay apart and
  // inside the chart.
  for (const s of document.querySelectorAll('svg.chart')) {
    const name = s.getAttribute('aria-label') || '';
    const box = s.getBoundingClientRect();
    const view = s.viewBox.baseVal;
    const scale = view && view.width ? box.width / view.width : 1;
    const texts = [...s.querySelectorAll('text')].filter(t => t.textContent.trim());
    const smallest = Math.min(...texts.map(t => parseFloat(getComputedStyle(t).fontSize) * scale));
    if (smallest < 9) wide.push('chart text ' + smallest.toFixed(1) + ' px high:' + name);
    const rects = texts.map(t => t.getBoundingClientRect());
    texts.forEach((t, i) => {
      const a = rects[i];
      if (a.left < box.left - 2 || a.right > box.right + 2) wide.push('label cut at the chart edge:' + name + ':' + t.textContent);
      for (let j = i + 1; j < rects.length; j++) {
        const b = rects[j];
        const across = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const down = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (across > 1 && down > 1) wide.push('labels overlap:' + name + ':' + t.textContent + ' / ' + texts[j].textContent);
      }
    });
  }
  const pre = document.createElement('pre'); pre.id = 'wide'; pre.textContent = wide.join('\\n');
  document.body.appendChild(pre);
});
</script>"""

# Headless Chromium started with a narrow --window-size lays a page out at least 500 px wide,
# so the probe measures the page in a frame of the exact width, whatever the window; the frame's
# document is the page's own (srcdoc), so the probe's findings can be read.
FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" style="border:0;width:{width}px;height:3200px" srcdoc="{page}"></iframe>
<script>
window.addEventListener('load', () => {{
  const inner = document.getElementById('page').contentWindow;
  const found = inner.document.getElementById('wide');
  const pre = document.createElement('pre'); pre.id = 'wide';
  pre.textContent = !found ? 'probe did not run' : inner.innerWidth !== {width} ? 'probe ran at ' + inner.innerWidth + ' px' : found.textContent;
  document.body.appendChild(pre);
}});
</script></body></html>"""


def _shoot(browser: Browser, page_html: str, stem: str, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / f"{stem}.html"
    page.write_text(page_html, encoding="utf-8")
    for width in WIDTHS:
        shot = ARTIFACTS / f"{stem}_{width}.png"
        screenshot(browser, page, shot, width, 3200)
        assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        probe = tmp_path / f"{stem}_{width}_probe.html"
        framed = escape(page_html.replace("</body>", WIDTH_PROBE + "</body>"), quote=True)
        probe.write_text(FRAME.format(width=width, page=framed), encoding="utf-8")
        with Page(browser, probe, width, 3200) as tab:
            dom = tab.dom_when("#wide")
        match = re.search(r"<pre id=\"wide\">(.*?)</pre>", dom, re.S)
        assert match is not None, "probe output missing"
        assert match.group(1).strip() == "", f"{stem} at {width} px: {unescape(match.group(1))}"


@pytest.mark.parametrize("name", ["train_eager", "regimes", "fix_tf32_before", "train_compiled"])
def test_analyze_page_screenshots(name: str, browser: Browser, tmp_path: Path) -> None:
    _shoot(browser, sample_html(name), f"analyze_{name}", tmp_path)


@pytest.mark.parametrize(("before", "after"), [("amp_off", "amp_on"), ("dataloader_w0", "dataloader_w4")])
def test_diff_page_screenshots(before: str, after: str, browser: Browser, tmp_path: Path) -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    result = diff(SAMPLES / f"{before}.json.gz", SAMPLES / f"{after}.json.gz", label_before=before, label_after=after)
    _shoot(browser, render_diff_html(result), f"diff_{before}_{after}", tmp_path)


def test_compare_and_job_page_screenshots(browser: Browser, tmp_path: Path) -> None:
    from traceinsight.api import analyze, compare, load_job
    from traceinsight.render.formats import render

    series = compare([SAMPLES / "fix_tf32_before.json.gz", SAMPLES / "fix_tf32_after.json.gz"])
    _shoot(browser, render(series, "html"), "compare_fix_tf32", tmp_path)
    job = analyze(load_job([SAMPLES / f"job_straggler.rank{i}.json.gz" for i in range(4)]))
    _shoot(browser, render(job, "html"), "job_straggler", tmp_path)


def test_diff_page_opens_with_its_verdict_and_cards() -> None:
    from traceinsight.api import diff
    from traceinsight.render.diff.html import render_diff_html

    page = render_diff_html(diff(SAMPLES / "amp_off.json.gz", SAMPLES / "amp_on.json.gz"))
    body = page.split("<body", 1)[1]
    verdict, first_card, facts = body.find("class='verdict'"), body.find("<section"), body.find("<dl class='facts'>")
    assert 0 <= verdict < first_card < facts, (verdict, first_card, facts)
    assert "<dt>bound: basis</dt><dd></dd>" not in page
