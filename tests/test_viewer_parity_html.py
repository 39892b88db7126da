"""proton-view --html opens on the metric that covers the profile: GPU time, else cpu_time.

On a host-only training step the page opened on ``flops`` (the first metric
that adds up), which two frames carry: the rest were drawn zero-wide.
"""

import json
import os
import re

import pytest

import proton_core as proton
from proton_core import viewer

CHROMIUM = "/usr/bin/chromium"
FRAMES = ["ROOT", "train_step", "forward", "matmul", "relu", "backward", "matmul_grad", "optimizer"]


@pytest.fixture
def host_step(tmp_path):
    """ROOT / train_step / {forward / {matmul, relu}, backward / matmul_grad, optimizer}: cpu_time on every
    scope, flops on the two matmuls (host backend, no GPU)."""
    proton.start(str(tmp_path / "step"), backend="host")
    with proton.cpu_timed_scope("train_step"):
        with proton.cpu_timed_scope("forward"):
            with proton.cpu_timed_scope("matmul", metrics={"flops": 2e9}):
                sum(range(2000))
            with proton.cpu_timed_scope("relu"):
                sum(range(2000))
        with proton.cpu_timed_scope("backward"):
            with proton.cpu_timed_scope("matmul_grad", metrics={"flops": 4e9}):
                sum(range(2000))
        with proton.cpu_timed_scope("optimizer"):
            sum(range(2000))
    proton.finalize()
    return tmp_path / "step.hatchet"


def page_json(path):
    text = path.read_text()
    m = re.search(r'<script id="proton-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def write(tmp_path, *argv):
    out = tmp_path / "page.html"
    assert viewer.main(["--html", str(out), *map(str, argv)]) == 0
    return page_json(out)


def drawn(data, k=0):
    """Frames the page draws for metric ``k``: a frame's width is its own plus its subtree's."""
    names = [data["names"][i] for i in data["name"]]
    width = list(data["value"][k])
    for p in range(len(names) - 1, 0, -1):  # pre-order: every child after its parent
        width[data["parent"][p]] += width[p]
    return [n for n, w in zip(names, width) if w > 0]


def test_host_only_profile_opens_on_cpu_time(tmp_path, host_step):
    data = write(tmp_path, host_step)
    assert data["metrics"][0] == "cpu_time (ns)"
    assert set(data["metrics"]) == {"cpu_time (ns)", "flops"}  # flops is still offered
    assert sorted(drawn(data)) == sorted(FRAMES)
    flops = data["metrics"].index("flops")
    assert sorted(drawn(data, flops)) == ["ROOT", "backward", "forward", "matmul", "matmul_grad", "train_step"]


def test_gpu_time_comes_first(tmp_path, fake):
    proton.start(str(tmp_path / "gpu"), backend="fake")
    with proton.cpu_timed_scope("step", metrics={"flops": 1.0, "bytes": 2.0}):
        fake.launch("k1", 3000)
    proton.finalize()
    data = write(tmp_path, tmp_path / "gpu.hatchet")
    assert data["metrics"][0] == "time (ns)"
    assert data["value"][0] == [0, 0, 3000]


def test_dash_m_names_the_opening_metric(tmp_path, host_step):
    assert write(tmp_path, "-m", "flops", host_step)["metrics"][0] == "flops"
    assert write(tmp_path, "-m", "cpu_time/us", host_step)["metrics"][0] == "cpu_time (ns)"
    data = write(tmp_path, "-m", "flops,cpu_time/ms", host_step)
    assert data["metrics"] == ["flops", "cpu_time (ns)"]
    values = dict(zip(data["metrics"], data["value"]))
    names = [data["names"][i] for i in data["name"]]
    assert values["flops"][names.index("matmul")] == 2e9  # widths follow their metric after the reorder


@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"{CHROMIUM} is missing")
def test_the_browser_draws_every_frame(tmp_path, host_step):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    out = tmp_path / "page.html"
    assert viewer.main(["--html", str(out), str(host_step)]) == 0
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_page(viewport={"width": 1200, "height": 600})
        page.route("**/*", lambda r: r.abort() if not r.request.url.startswith("file:") else r.continue_())
        page.goto(out.as_uri())
        page.wait_for_function("window.protonView !== undefined")
        assert page.evaluate("window.protonView.metrics")[0] == "cpu_time (ns)"
        assert sorted(page.evaluate("window.protonView.frames()")) == sorted(FRAMES)
        browser.close()
