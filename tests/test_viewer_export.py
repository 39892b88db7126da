"""What proton-view hands to other tools: a hatchet GraphFrame, a speedscope file, a self-contained HTML page."""

import json
import re

import pytest

import proton_core as proton
from proton_core import viewer
from proton_core.viewer import html as viewer_html
from test_viewer import bad


@pytest.fixture
def run(tmp_path, fake):
    """ROOT / step{cpu_time} / fwd{k1: 3000, k2: 1000}, bwd{k3: 2000}; flops16 on fwd."""
    proton.start(str(tmp_path / "run"), backend="fake")
    with proton.cpu_timed_scope("step"):
        with proton.scope("fwd", metrics={"flops16": 4e6}):
            fake.launch("k1", 3000)
            fake.launch("k2", 1000)
        with proton.scope("bwd"):
            fake.launch("k3", 2000)
    proton.finalize()
    return tmp_path / "run.hatchet"


@pytest.fixture
def older(tmp_path, fake):
    """The same run before a change: k1 was faster, k3 slower, k2 absent."""
    proton.start(str(tmp_path / "older"), backend="fake")
    with proton.cpu_timed_scope("step"):
        with proton.scope("fwd", metrics={"flops16": 4e6}):
            fake.launch("k1", 1000)
        with proton.scope("bwd"):
            fake.launch("k3", 2500)
    proton.finalize()
    return tmp_path / "older.hatchet"


# ------------------------------------------------------------ hatchet ----
def test_load_graphframe(run):
    pytest.importorskip("hatchet", reason="llnl-hatchet is the viewer extra's analysis path")
    graph = viewer.load_graphframe(run)
    frame = graph.dataframe.reset_index()
    by_name = {name: group for name, group in frame.groupby("name")}
    assert set(by_name) == {"ROOT", "step", "fwd", "bwd", "k1", "k2", "k3"}
    assert by_name["ROOT"]["time (ns) (inc)"].iloc[0] == 6000
    assert by_name["fwd"]["time (ns) (inc)"].iloc[0] == 4000
    assert by_name["k1"]["time (ns)"].iloc[0] == 3000
    exclusive = viewer.load_graphframe(run, inclusive=False)
    assert "time (ns) (inc)" not in exclusive.dataframe.columns


def test_load_graphframe_bad_file_is_a_hatchet_error(tmp_path):
    pytest.importorskip("hatchet")
    from proton_core.formats.hatchet import HatchetError

    (tmp_path / "x.hatchet").write_text("[1]")
    with pytest.raises(HatchetError, match="not a Proton profile"):
        viewer.load_graphframe(tmp_path / "x.hatchet")


# ---------------------------------------------------------- speedscope ----
def test_speedscope_file(tmp_path, run, capsys):
    out = tmp_path / "run.speedscope.json"
    assert viewer.main(["--speedscope", str(out), str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"proton-view: wrote {out} (7 frames)"
    doc = json.loads(out.read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = [f["name"] for f in doc["shared"]["frames"]]
    assert sorted(frames) == ["ROOT", "bwd", "fwd", "k1", "k2", "k3", "step"]
    profiles = {p["name"]: p for p in doc["profiles"]}
    assert list(profiles)[0] == "time (ns)" and "cpu_time (ns)" in profiles and "count" in profiles
    time = profiles["time (ns)"]
    assert time["type"] == "evented" and time["unit"] == "nanoseconds" and time["endValue"] == 6000

    # events nest and each frame spans its total
    spans, stack, last = {}, [], 0
    for event in time["events"]:
        assert event["at"] >= last
        last = event["at"]
        name = frames[event["frame"]]
        if event["type"] == "O":
            stack.append((name, event["at"]))
        else:
            opened, at = stack.pop()
            assert opened == name
            spans[name] = event["at"] - at
    assert not stack
    assert spans == {"ROOT": 6000, "step": 6000, "fwd": 4000, "k1": 3000, "k2": 1000, "bwd": 2000, "k3": 2000}
    assert profiles["count"]["unit"] == "none" and profiles["count"]["endValue"] == 3


def test_speedscope_honours_depth(tmp_path, run, capsys):
    out = tmp_path / "shallow.json"
    assert viewer.main(["--speedscope", str(out), "-d", "3", str(run)]) == 0
    doc = json.loads(out.read_text())
    assert sorted(f["name"] for f in doc["shared"]["frames"]) == ["ROOT", "bwd", "fwd", "step"]
    assert doc["profiles"][0]["endValue"] == 6000  # a cut frame keeps its whole width


# ---------------------------------------------------------------- html ----
def page_json(path):
    text = path.read_text()
    m = re.search(r'<script id="proton-data" type="application/json">(.*?)</script>', text, re.S)
    return text, json.loads(m.group(1).replace("<\\/", "</"))


def test_html_page_is_one_offline_file(tmp_path, run, capsys):
    out = tmp_path / "run.html"
    assert viewer.main(["--html", str(out), "-m", "time/us,tflop16/s", str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"proton-view: wrote {out} (7 frames)"
    text, data = page_json(out)
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing fetched: all inline
    assert viewer_html.BUNDLE.read_text()[:200] in text.replace("<\\/", "</")
    assert "Apache License" in text and "ISC" in text  # the bundle's licences travel with it
    assert data["metrics"][0] == "time (ns)" and "cpu_time (ns)" in data["metrics"]
    names = [data["names"][i] for i in data["name"]]
    assert names == ["ROOT", "step", "fwd", "k1", "k2", "bwd", "k3"]
    own = dict(zip(names, data["value"][0]))
    assert own == {"ROOT": 0, "step": 0, "fwd": 0, "k1": 3000, "k2": 1000, "bwd": 0, "k3": 2000}
    tips = dict(zip(data["tips"], data["tip"]))
    assert tips["time/us"][names.index("fwd")] == 4.0
    assert tips["tflop16/s"][names.index("fwd")] == pytest.approx(1.0)  # 4e6 flops in 4 us
    assert tips["tflop16/s"][names.index("k1")] is None  # no value: null, never NaN


def test_html_diff_carries_the_change(tmp_path, run, older):
    out = tmp_path / "diff.html"
    assert viewer.main(["--html", str(out), "-diff", str(older), str(run)]) == 0
    _, data = page_json(out)
    assert data["diff"] is True
    names = [data["names"][i] for i in data["name"]]
    width = dict(zip(names, data["value"][0]))
    change = dict(zip(names, data["delta"][0]))
    assert width["k1"] == 3000 and change["k1"] == 2000  # as wide as this run, coloured by the change
    assert width["k2"] == 1000 and change["k2"] == 1000
    assert width["k3"] == 2000 and change["k3"] == -500


def test_html_write_error_is_one_line(tmp_path, run, capsys):
    assert "cannot write" in bad(capsys, "--html", str(tmp_path / "no" / "dir" / "x.html"), run)
