"""proton-view --html in a real browser: headless Chromium through Playwright draws the expected frames.

Needs Debian's chromium at /usr/bin/chromium and the Python package playwright (scripts/install.sh
installs both); never `playwright install`, whose download does not work here.
"""

import os

import pytest

import proton_core as proton
from proton_core import viewer

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def run(tmp_path, fake):
    """ROOT / step{cpu_time} / fwd{k1: 3000, k2: 1000}, bwd{k3: 2000}."""
    proton.start(str(tmp_path / "run"), backend="fake")
    with proton.cpu_timed_scope("step"):
        with proton.scope("fwd"):
            fake.launch("k1", 3000)
            fake.launch("k2", 1000)
        with proton.scope("bwd"):
            fake.launch("k3", 2000)
    proton.finalize()
    return tmp_path / "run.hatchet"


def open_page(browser, path):
    page = browser.new_page(viewport={"width": 1200, "height": 600})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.route("**/*", lambda route: route.abort() if not route.request.url.startswith("file:") else route.continue_())
    page.goto(path.as_uri())
    page.wait_for_function("window.protonView !== undefined")
    return page, errors


def frames(page):
    return page.evaluate("window.protonView.frames()")


def test_flame_graph_draws_every_frame(browser, run, tmp_path):
    out = tmp_path / "run.html"
    assert viewer.main(["--html", str(out), "-m", "time/us", str(run)]) == 0
    page, errors = open_page(browser, out)
    assert sorted(frames(page)) == ["ROOT", "bwd", "fwd", "k1", "k2", "k3", "step"]
    assert page.evaluate("window.protonView.metrics")[0] == "time (ns)"
    # frame widths follow the metric: k1 is three times k2
    page.wait_for_timeout(700)  # the library animates widths in
    width = {name: float(page.get_attribute(f'g.frame[name="{name}"] rect', "width")) for name in ("k1", "k2", "ROOT")}
    assert width["k1"] == pytest.approx(3 * width["k2"], rel=1e-3)
    assert width["ROOT"] == pytest.approx(2 * width["k1"], rel=1e-3)

    # the tooltip lists the node's metrics
    page.hover('g.frame[name="k1"]')
    tip = page.wait_for_selector(".d3-flame-graph-tip", state="visible")
    assert "k1" in tip.inner_text() and "time/us" in tip.inner_text() and "3" in tip.inner_text()

    # search marks the matching frames and says how much they weigh
    page.fill("#proton-search", "k")
    assert page.inner_text("#proton-details").startswith("3 frames match: 6,000 of 6,000")

    # another metric: only what has cpu_time is drawn
    page.select_option("#proton-metric", label="cpu_time (ns)")
    page.wait_for_timeout(100)
    assert sorted(frames(page)) == ["ROOT", "step"]

    # zoom: a click on fwd leaves its path and its subtree
    page.select_option("#proton-metric", label="time (ns)")
    page.fill("#proton-search", "")
    page.dispatch_event('g.frame[name="fwd"]', "click")
    page.wait_for_timeout(100)
    assert sorted(frames(page)) == ["ROOT", "fwd", "k1", "k2", "step"]
    page.click("#proton-reset")
    page.wait_for_timeout(100)
    assert len(frames(page)) == 7

    shot = tmp_path / "flamegraph.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 5000
    assert errors == []
    page.close()


def test_diff_colours_by_the_change(browser, run, tmp_path, fake):
    proton.start(str(tmp_path / "older"), backend="fake")
    with proton.cpu_timed_scope("step"):
        with proton.scope("fwd"):
            fake.launch("k1", 1000)
            fake.launch("k2", 1000)
        with proton.scope("bwd"):
            fake.launch("k3", 4000)
    proton.finalize()
    out = tmp_path / "diff.html"
    assert viewer.main(["--html", str(out), "-diff", str(tmp_path / "older.hatchet"), str(run)]) == 0
    page, errors = open_page(browser, out)
    assert sorted(frames(page)) == ["ROOT", "bwd", "fwd", "k1", "k2", "k3", "step"]

    def rgb(name):
        fill = page.get_attribute(f'g.frame[name="{name}"] rect', "fill")
        return tuple(int(x) for x in fill[fill.index("(") + 1:-1].split(","))

    r, g, b = rgb("k1")  # 1000 -> 3000: red
    assert r > g and r > b
    r, g, b = rgb("k3")  # 4000 -> 2000: blue
    assert b > r and b > g
    assert rgb("k2") == (220, 220, 220)  # unchanged: grey
    assert errors == []
    page.close()
