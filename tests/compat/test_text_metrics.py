"""Text values for properties and exclusive metrics, as upstream takes them (``{"a (pty)": "1"}``).

Upstream's test_scope_properties / test_scope_exclusive: the file holds the text under the key upstream
writes (``a``), text does not add up (the last one set at a node wins), and an inclusive metric must stay
a number.
"""

import json

import pytest

import proton_core as proton
from proton_core.formats import hatchet
from proton_core.viewer import main as view


def by_name(node):
    return {c["frame"]["name"]: c for c in node["children"]}


def test_text_properties_and_exclusive_metrics_are_written_as_given(tmp_path):
    path = tmp_path / "t.hatchet"
    proton.start(str(tmp_path / "t"), backend="host")
    with proton.scope("test0", {"a (pty)": "1"}):
        with proton.scope("inner", metrics={"b (exc)": "x"}):
            pass

    @proton.scope("test1", {"a (pty)": "1"})
    def foo():
        pass

    foo()
    proton.enter_scope("test2", metrics={"a (pty)": 1.0})
    proton.exit_scope()
    proton.enter_scope("test2", metrics={"a (pty)": 1.0})
    proton.exit_scope()
    with proton.scope("test3", {"e (exc)": "one"}):
        pass
    with proton.scope("test3", {"e (exc)": "two"}):
        pass
    proton.finalize()
    doc = json.loads(path.read_text())
    nodes = by_name(doc[0])
    assert nodes["test0"]["metrics"]["a"] == "1" and nodes["test1"]["metrics"]["a"] == "1"
    assert nodes["test2"]["metrics"]["a"] == 1.0  # properties do not add up
    assert by_name(nodes["test0"])["inner"]["metrics"]["b"] == "x"
    assert nodes["test3"]["metrics"]["e"] == "two"  # text does not add up: the last one wins
    assert hatchet.read(str(path)).root is not None  # our reader takes it back


def test_the_viewer_reads_a_profile_with_text_values(tmp_path, capsys):
    proton.start(str(tmp_path / "v"), backend="host")
    with proton.cpu_timed_scope("s"):
        with proton.scope("t", {"a (pty)": "label", "n (exc)": 3}):
            pass
    proton.finalize()
    assert view(["-l", str(tmp_path / "v.hatchet")]) == 0
    assert view(["-m", "cpu_time/ns,n(exc)", str(tmp_path / "v.hatchet")]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err


def test_an_inclusive_metric_must_stay_a_number(tmp_path):
    proton.start(str(tmp_path / "n"), backend="host")
    try:
        with pytest.raises(proton.ProtonError, match=r"metric 'flops' has the text value '1'.*'flops \(pty\)'"):
            with proton.scope("s", {"flops": "1"}):
                pass
    finally:
        proton.finalize()

