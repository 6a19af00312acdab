"""The report in a real browser: headless Chromium (Debian's chromium + chromedriver, driven by Selenium).

Checks what a reader sees: every figure decoded (naturalWidth > 0), no console error, no request
leaving the page (only data: and file: URLs in Chromium's network log), and the summary above the
fold at 1366x768, kept as a screenshot (ACCELBENCH_SCREENSHOT_DIR, default tests/artifacts/).

Needs ``bash .ci/setup-browser.sh`` (root, apt). Without chromium the tests are skipped, or fail
when ACCELBENCH_REQUIRE_BROWSER=1 (CI sets it so a missing browser cannot pass silently).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from accelbench import registry

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1366, 768
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    f"--window-size={WIDTH},{HEIGHT}",
]


def screenshot_dir() -> Path:
    d = Path(os.environ.get("ACCELBENCH_SCREENSHOT_DIR") or Path(__file__).parent / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        msg = f"needs {', '.join(missing)}: run bash .ci/setup-browser.sh"
        if os.environ.get("ACCELBENCH_REQUIRE_BROWSER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    yield driver
    driver.quit()


def open_report(driver, report: Path) -> dict:
    """Load the report in a fresh page; return its console messages and the URLs it requested."""
    driver.get("about:blank")
    driver.get_log("performance")  # drop whatever the browser's start page did
    driver.get_log("browser")
    driver.get(report.resolve().as_uri())
    driver.execute_script("return document.readyState")  # get() returns after the load event
    requests, failed = [], []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed":
            failed.append(message["params"])
    return {"console": driver.get_log("browser"), "requests": requests, "failed": failed}


@pytest.mark.parametrize("name", ["two_runs", "incomplete", "compared", "history"])
def test_report_in_chromium(browser, fixtures, name):
    report = fixtures(name)["report"]
    seen = open_report(browser, report)

    assert browser.execute_script("return document.readyState") == "complete"
    images = browser.execute_script(
        "return Array.from(document.images).map(i => [i.alt.split(':')[0], i.complete, i.naturalWidth])"
    )
    names = [alt for alt, _, _ in images]
    assert len(names) == len(set(names)) and set(names) <= set(registry.FIGURES) | {"comparison"}, names
    if name in ("compared", "history"):  # CPU runs only, scaling off, no fleet: no transfer, scaling, fleet figures
        assert (names[0] == "comparison") == (name == "compared")  # the comparison's first
        assert set(registry.FIGURES) - set(names) == {
            "transfer",
            "scaling_efficiency",
            "collective_busbw",
            "peer_copy",
            "fleet",
        }, names
    else:  # every registry figure
        assert "comparison" not in names and len(names) == len(registry.FIGURES), names
    broken = [alt for alt, complete, width in images if not complete or width <= 0]
    assert not broken, f"figures not decoded: {broken}"
    # the roofline and the bandwidth figure render (decoded, not a placeholder-sized image) where they belong
    placed = browser.execute_script("""return ['roofline', 'membw'].map(id => {
        const img = document.querySelector('#' + id + ' img'); return img ? [img.naturalWidth, img.naturalHeight] : null; });""")
    assert all(p and p[0] >= 800 and p[1] >= 400 for p in placed), placed

    errors = [m for m in seen["console"] if m.get("level") in ("SEVERE", "ERROR")]
    assert not errors, errors
    assert seen["requests"], "the network log recorded nothing: the check would be blind"
    outside = [u for u in seen["requests"] if not u.startswith(("data:", "file:"))]
    assert not outside, f"requests leaving the page: {outside[:5]}"
    assert report.resolve().as_uri() in seen["requests"]
    assert not seen["failed"], seen["failed"][:3]

    assert browser.execute_script("return [window.innerWidth, window.innerHeight]") == [WIDTH, HEIGHT]
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH, "horizontal scrolling"
    boxes = browser.execute_script("""
        const box = id => { const r = document.getElementById(id).getBoundingClientRect();
                            return {top: r.top, bottom: r.bottom, height: r.height}; };
        return {matmul: box('summary-matmul'), speedup: box('summary-speedup'), amp: box('summary-amp')};""")
    path = screenshot_dir() / f"report-{name}-{WIDTH}x{HEIGHT}.png"
    browser.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if name == "compared":
        section = browser.execute_script("""
            const s = document.getElementById('compare'), h = s.querySelector('h2'), img = s.querySelector('img');
            const prev = s.previousElementSibling;
            return {title: h.textContent, headline: document.getElementById('compare-headline').textContent,
                    after: prev ? prev.id : null, img: img ? [img.naturalWidth, img.getBoundingClientRect().width] : null,
                    slower: s.querySelectorAll('tr[data-verdict="slower"]').length,
                    first: s.querySelector('#compare-table tbody tr').dataset.verdict,
                    amp: s.querySelectorAll('#compare-amp tbody tr').length,
                    prov: document.getElementById('compare-provenance').innerText};""")
        assert section["title"] == "Compared with laptop-cpu+2" and section["after"] == "summary"  # 3 runs a side
        assert section["headline"].startswith("laptop-cpu-1t+2 against laptop-cpu+2 (3 vs 3 runs): 2 of ")
        assert section["img"][0] > 500 and 0 < section["img"][1] <= WIDTH
        assert (
            section["slower"] == 2 and section["first"] == "slower" and section["amp"] == 4
        )  # mlp, transformer, gpt, resnet
        assert "threads" in section["prov"] and "cpu_threads" in section["prov"]
        browser.execute_script("document.getElementById('compare').scrollIntoView()")
        browser.save_screenshot(str(screenshot_dir() / f"report-{name}-section-{WIDTH}x{HEIGHT}.png"))
    if name == "history":  # the History section: its figure decoded at full width, the change point in its table
        section = browser.execute_script("""
            const s = document.getElementById('history'), img = s.querySelector('img');
            return {img: img ? [img.naturalWidth, img.getBoundingClientRect().width] : null,
                    rows: Array.from(s.querySelectorAll('#history-table tbody tr')).map(r => [r.dataset.verdict, r.innerText])};""")
        assert section["img"][0] > 800 and 0 < section["img"][1] <= WIDTH
        assert section["rows"] and all(v == "slower" and "night-007" in t for v, t in section["rows"])
        browser.execute_script("document.getElementById('history').scrollIntoView()")
        browser.save_screenshot(str(screenshot_dir() / f"report-{name}-section-{WIDTH}x{HEIGHT}.png"))
    if name in ("two_runs", "compared"):  # (five runs in full, as in the history fixture, make a taller summary)
        # the whole summary (best TFLOP/s, CPU speedup, AMP verdicts) is visible without scrolling
        for card, box in boxes.items():
            assert box["height"] > 50 and box["top"] >= 0 and box["bottom"] <= HEIGHT, (card, box)
    elif name == "incomplete":
        banner = browser.execute_script(
            "const r = document.getElementById('incomplete').getBoundingClientRect(); return [r.top, r.bottom];"
        )
        assert 0 <= banner[0] < banner[1] <= HEIGHT  # the warning is the first thing seen
        assert "matmul_cuda.csv" in browser.find_element("id", "incomplete").text
