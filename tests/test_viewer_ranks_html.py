"""proton-view --html of rank files in a real browser (headless Chromium through Playwright, as
tests/test_viewer_html.py): a bar per rank for the clicked frame, the slowest marked."""

import os
from pathlib import Path

import pytest

from proton_core import viewer

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DATA = Path(__file__).parent / "data" / "ranks"

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")


def test_per_rank_bars_follow_the_clicked_frame(tmp_path):
    out = tmp_path / "ranks.html"
    assert viewer.main(["--html", str(out), str(DATA)]) == 0
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 600})
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.route("**/*", lambda r: r.abort() if not r.request.url.startswith("file:") else r.continue_())
            page.goto(out.as_uri())
            page.wait_for_function("window.protonView !== undefined && window.protonRanks !== undefined")
            rows = page.query_selector_all("#proton-rank-bars tr")
            assert [r.get_attribute("data-rank") for r in rows] == ["0", "1", "2", "3"]
            assert "ROOT" in page.inner_text("#proton-ranks")  # the root at first: 600, 700, 800, 1500
            page.wait_for_timeout(400)
            page.click('g.frame[name="gemm"]')
            page.wait_for_function("document.querySelector('#proton-ranks').innerText.includes('gemm')")
            assert page.evaluate("window.protonRanks.values(window.protonRanks.selected())") == [100, 200, 300, 1000]
            widths = [float(b.evaluate("e => e.getBoundingClientRect().width"))
                      for b in page.query_selector_all(".proton-rank-bar")]
            assert widths[3] == pytest.approx(400) and widths[0] == pytest.approx(40, abs=1)
            assert "(slowest)" in page.inner_text('#proton-rank-bars tr[data-rank="3"]')
            assert errors == []
        finally:
            browser.close()
