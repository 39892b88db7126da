"""List-valued metrics, as upstream main takes them (test_profile.py's test_metrics: ``"bar": [1, 2, 3]``)."""

import json

import pytest

import proton_core as proton
from proton_core.formats import hatchet


def test_list_metrics_are_written_as_lists_and_add_element_by_element(tmp_path):
    proton.start(str(tmp_path / "l"), backend="host")
    with proton.scope("test0", {"foo": 1.0, "bar": [1, 2, 3], "baz": [1.0, 2.0, 3.0]}):
        pass
    with proton.scope("test0", {"bar": [10, 20], "v (pty)": [5, 6]}):
        pass
    with proton.scope("test0", {"v (pty)": [7]}):
        pass
    proton.finalize()
    (test0,) = json.loads((tmp_path / "l.hatchet").read_text())[0]["children"]
    assert test0["metrics"]["foo"] == 1.0
    assert test0["metrics"]["bar"] == [11, 22, 3]  # the shorter padded with zeros
    assert test0["metrics"]["baz"] == [1.0, 2.0, 3.0]
    assert test0["metrics"]["v"] == [7]  # a property: the last one set
    root = json.loads((tmp_path / "l.hatchet").read_text())[0]
    assert "bar" not in root["metrics"]  # never marked for summing: no viewer adds lists up the tree
    assert hatchet.read(str(tmp_path / "l.hatchet")).root.children[0].metrics["foo"] == 1.0  # our reader reads it


@pytest.mark.parametrize("value, words", [
    ([], "is an empty list"),
    ([1, "a"], "has 'a' at index 1: a list metric holds numbers only"),
    ([1, -2], "negative value -2"),
    ([1, [2]], "at index 1"),
    ([True], "bool value"),
])
def test_bad_lists_are_one_line_errors(tmp_path, value, words):
    proton.start(str(tmp_path / "b"), backend="host")
    try:
        with pytest.raises(proton.ProtonError, match=words.replace("[", r"\[").replace("(", r"\(")) as err:
            with proton.scope("s", {"bar": value}):
                pass
        assert "\n" not in str(err.value)
    finally:
        proton.finalize()


def test_the_viewer_reads_a_profile_with_list_metrics(tmp_path, capsys):
    from proton_core.viewer import main

    proton.start(str(tmp_path / "v"), backend="host")
    with proton.cpu_timed_scope("s"):
        with proton.scope("t", {"bar": [1, 2]}):
            pass
    proton.finalize()
    assert main([str(tmp_path / "v.hatchet")]) == 0
    assert main(["-l", str(tmp_path / "v.hatchet")]) == 0
    assert "Traceback" not in capsys.readouterr().err
