"""report.html opened in a real browser: headless Chromium (Debian's `chromium` and its driver
`chromium-driver`, installed by `make browser`, which `make test` runs) at 1,280 px and at
390 px wide.

Not a pure-logic test: it starts a browser process (a few seconds), but needs no Docker, no
Spark and no network, so it runs with the unit tests in the gate (`make test`). The report is
rendered from crafted results (tests/unit/report_runs.py) with every part a real run has: the
matrix with the price-of-safety columns, the loss chart, the cross-run summary and its chart,
the timelines, example messages and provenance. At each width: no console error (level
SEVERE), no element reaching past the viewport unless it sits inside a box of its own that
scrolls horizontally, every chart (`svg`) drawn with a non-empty box, and a screenshot of the
whole page (and of the matrix) kept in the test's tmp folder.

When the browser or its driver is missing the test fails naming the fix; it never skips."""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis.crossrun.summary import cross_run_summary
from analysis.report.render import render_report
from tests.unit.report_runs import (
    AP,
    CP,
    RUNS,
    events_with_fault_and_leader_change,
    judge_all,
    priced,
    result,
)
from tests.unit.results_json import typed

pytestmark = pytest.mark.browser

CHROMIUM = ("chromium", "chromium-browser")
CHROMEDRIVER = "chromedriver"
FIX = (
    "Fix: make browser (as root it installs them with apt-get; make test runs it), or "
    "apt-get install chromium chromium-driver"
)
WIDTHS = (1280, 390)

# A long cell name of the kind a matrix with axes gives, which must wrap, not widen the page.
LONG = "scenario=last-replica-standing,acks=all,min.insync.replicas=2,fault=leader-partition"


def _executable(*names: str) -> str | None:
    """The first of `names` on PATH (or in /usr/bin, where Debian puts them)."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/lib/chromium")
        if found:
            return found
    return None


def browser_paths() -> tuple[str, str]:
    """The paths of Chromium and its driver; a failure naming the fix when one is missing (in
    CI and out of it: a skipped browser test would pass a report nobody opened)."""
    chromium, driver = _executable(*CHROMIUM), _executable(CHROMEDRIVER)
    if chromium is None or driver is None:
        missing = [
            package
            for package, found in (("chromium", chromium), ("chromium-driver", driver))
            if found is None
        ]
        pytest.fail(f"missing {' and '.join(missing)}, needed by the browser test. {FIX}")
    return chromium, driver


def test_a_missing_browser_fails_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, path=None: None)
    with pytest.raises(pytest.fail.Exception) as failed:
        browser_paths()
    assert str(failed.value) == (
        "missing chromium and chromium-driver, needed by the browser test. Fix: make browser "
        "(as root it installs them with apt-get; make test runs it), or "
        "apt-get install chromium chromium-driver"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium through the system chromedriver (nothing downloaded: the driver's
    path is given, so Selenium Manager is never asked), console messages of every level kept."""
    chromium, driver_path = browser_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:  # a dev dependency: the virtualenv is out of date
        pytest.fail("selenium is not installed. Fix: make venv (pip install -e '.[dev]')")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # Selenium Manager, were it ever asked: no downloads
        driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html with every part: three cells (one of them named as long as a matrix with
    axes names them), losses with examples, a divergence, the price of safety, the cross-run
    summary, timelines and provenance."""
    raws = [
        result("ap-leader-partition", AP, 0),
        result("ap-leader-partition", AP, 1, lost=3),
        result("cp-leader-kill", CP, 0, offset_divergent=1, moved=1),
        result(LONG, {**CP, "kafka_version": "4.3.1"}, 0, lost=12, unseen=4),
    ]
    events = {r["run_dir"]: events_with_fault_and_leader_change() for r in raws}
    cells = judge_all(raws, events)
    results = [typed(r) for r in raws]
    results = [
        priced(r, stall_s=1.0 + i * 4, failed=40 * i, recovery_s=None if i == 2 else 0.2)
        for i, r in enumerate(results)
    ]
    summary = cross_run_summary(results, cells)
    out = tmp_path_factory.mktemp("report")
    paths = render_report(cells, results, events, RUNS, out, "Chaos report", summary)
    assert paths.failures == ()
    return paths.html


# Every element whose box reaches past the viewport's left or right edge and has no ancestor
# that scrolls horizontally (overflow-x auto or scroll) inside the viewport: what a reader
# would find cut off, or the page itself scrolling sideways.
OVERFLOWING = """
const width = arguments[0];
const scrolls = (el) => {
  for (let a = el.parentElement; a; a = a.parentElement) {
    const x = getComputedStyle(a).overflowX;
    if (x === 'auto' || x === 'scroll') {
      const r = a.getBoundingClientRect();
      return r.left >= -1 && r.right <= width + 1;
    }
  }
  return false;
};
const out = [];
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;
  if ((r.right > width + 1 || r.left < -1) && !scrolls(el)) {
    const cls = typeof el.className === 'string' && el.className ? el.className : '';
    const name = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (cls ? '.' + cls.split(' ').join('.') : '');
    out.push(name + ' [' + Math.round(r.left) + ', ' + Math.round(r.right) + ']');
  }
}
return {inner: window.innerWidth, page: document.documentElement.scrollWidth, out: out};
"""

# Every svg's box on the page and the box of what is drawn in it.
CHARTS = """
return Array.from(document.querySelectorAll('svg')).map((svg) => {
  const r = svg.getBoundingClientRect();
  const b = svg.getBBox();
  return {label: svg.getAttribute('aria-label') || '', w: r.width, h: r.height,
          drawn_w: b.width, drawn_h: b.height,
          shapes: svg.querySelectorAll('path, rect, line, polyline, polygon, text, use').length};
});
"""

# The matrix: its scrolling box's width and the table's full width.
MATRIX = """
const table = document.querySelector('table.matrix');
const box = table.parentElement;
return {box: box.clientWidth, table: table.scrollWidth, overflow: getComputedStyle(box).overflowX,
        fits: box.getBoundingClientRect().right <= window.innerWidth + 1};
"""


def _png(driver: Any, clip: dict[str, float]) -> bytes:
    """The page's region `clip` (x, y, width, height in page pixels), past the viewport too
    (Chrome DevTools' captureBeyondViewport)."""
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1}},
    )
    return base64.b64decode(shot["data"])


def _full_page_png(driver: Any) -> bytes:
    """The whole page as a reader scrolls through it, not only the viewport."""
    return _png(
        driver,
        driver.execute_script(
            "const e = document.documentElement;"
            "return {x: 0, y: 0, width: e.clientWidth, height: e.scrollHeight};"
        ),
    )


# The matrix's box opened up for a moment: every column of the table as laid out at this
# width, including those a reader scrolls sideways to.
MATRIX_OPENED = """
const table = document.querySelector('table.matrix');
table.parentElement.style.overflowX = 'visible';
const r = table.getBoundingClientRect();
return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: table.scrollWidth,
        height: r.height};
"""


# The matrix's leading headers: how far each one's right edge is from the box's left edge,
# and the box's visible width (what a reader sees before scrolling the matrix sideways).
LEADING = """
const box = document.querySelector('table.matrix').parentElement;
const left = box.getBoundingClientRect().left;
const heads = {};
for (const th of document.querySelectorAll('table.matrix thead th')) {
  const name = th.textContent.trim();
  if (!(name in heads)) heads[name] = th.getBoundingClientRect().right - left;
}
return {visible: box.clientWidth, heads: heads};
"""


def _whole_matrix_png(driver: Any) -> bytes:
    """The whole matrix, every column, then its box scrolling again."""
    try:
        return _png(driver, driver.execute_script(MATRIX_OPENED))
    finally:
        driver.execute_script(
            "document.querySelector('table.matrix').parentElement.style.overflowX = ''"
        )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_reads_in_a_browser_at_desktop_and_phone_width(
    browser: Any, report: Path, width: int, tmp_path: Path
) -> None:
    started = time.monotonic()
    mobile = width < 600
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile},
    )
    browser.get_log("browser")  # drop what an earlier page said
    browser.get(report.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], f"console errors at {width} px: {severe}"

    layout = browser.execute_script(OVERFLOWING, width)
    assert layout["out"] == [], f"wider than the {width} px viewport: {layout['out']}"
    # A phone lays out a page wider than its screen at that width, then zooms out to it.
    assert layout["page"] <= width, f"the page scrolls sideways at {width} px: {layout}"
    assert layout["inner"] == width, f"the page is zoomed out at {width} px: {layout}"

    charts = browser.execute_script(CHARTS)
    # Three timelines (one per repetition drawn), the loss chart and the cross-run chart.
    assert len(charts) >= 5, charts
    empty = [c for c in charts if not (c["w"] > 0 and c["h"] > 0 and c["shapes"] > 0)]
    empty += [c for c in charts if not (c["drawn_w"] > 0 and c["drawn_h"] > 0)]
    assert empty == [], f"charts drawn empty at {width} px: {empty}"

    matrix = browser.execute_script(MATRIX)
    assert matrix["fits"], matrix
    if matrix["table"] > matrix["box"]:  # wider than its box: the box scrolls, the page not
        assert matrix["overflow"] in ("auto", "scroll"), matrix

    # What a reader needs first is seen before scrolling the matrix: the verdict, and at
    # desktop width the loss and its rate too.
    leading = browser.execute_script(LEADING)
    wanted = ("cell", "verdict") if mobile else ("cell", "verdict", "loss", "loss rate")
    hidden = [h for h in wanted if not leading["heads"][h] <= leading["visible"] + 1]
    assert hidden == [], f"{hidden} need a sideways scroll at {width} px: {leading}"

    page = tmp_path / f"report-{width}px.png"
    page.write_bytes(_full_page_png(browser))
    (tmp_path / f"matrix-{width}px.png").write_bytes(_whole_matrix_png(browser))
    assert page.stat().st_size > 10_000
    print(f"{width} px: checked in {time.monotonic() - started:.1f} s; screenshots in {tmp_path}")
