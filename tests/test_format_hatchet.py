"""The hatchet format module: what the writer puts in a file, the reader gets back."""

import json
import math

import pytest

from proton_core.model import Profile, Tree
from proton_core.errors import ProtonError
from proton_core.formats import hatchet
from proton_core.inclusive import subtree_sums
from proton_core.metrics import parse_name


def metrics(**values):
    return [(parse_name(k, allow_reserved=True), v) for k, v in values.items()]


def sample_tree(depth=0):
    """outer{k on CUDA 0, CUDA 1, HIP 0; inner/k2}, inc/exc/pty/cpu_time metrics, a ``depth``-level chain."""
    tree = Tree()
    tree.add_metrics(("outer",), metrics(**{"bytes": 10, "tokens (n)(exc)": 3, "batch (n)(pty)": 8,
                                            "cpu_time (ns)": 500}))
    tree.add_metrics(("outer", "inner"), metrics(bytes=5, **{"cpu_time (ns)": 200}))
    tree.add_kernel(("outer",), "k", "CUDA", 1, 10, 1)
    tree.add_kernel(("outer",), "k", "CUDA", 0, 20, 2)
    tree.add_kernel(("outer",), "k", "HIP", 0, 7, 1)
    tree.add_metrics(("outer", "k"), metrics(flops16=100))
    tree.add_kernel(("outer", "inner"), "k2", "CUDA", 0, 5, 1)
    if depth:
        tree.add_kernel(tuple(f"f{i}" for i in range(depth)), "deep_kernel", "CUDA", 0, 9, 1)
    devices = {"CUDA": {"0": {"arch": "90"}, "1": {"arch": "90"}, "7": {"arch": "80"}}, "HIP": {"0": {"arch": "gfx942"}}}
    return Profile("p", "shadow", "tree", tree, devices=devices)


def child(node, name, device=None):
    (match,) = [c for c in node.children if c.name == name and (device is None or c.device == device)]
    return match


def test_bytes_are_upstreams_schema(tmp_path):
    """Compact JSON, root marked with count/time, one sibling per device, children under the first."""
    tree = Tree()
    tree.add_metrics(("s",), metrics(**{"x (exc)": 1}))
    tree.add_kernel(("s",), "k", "CUDA", 1, 4, 1)
    tree.add_kernel(("s",), "k", "CUDA", 0, 3, 2)
    tree.add_kernel(("s", "k"), "k_inner", "CUDA", 0, 1, 1)
    path = tmp_path / "b.hatchet"
    hatchet.write(Profile("b", "shadow", "tree", tree, devices={"CUDA": {"0": {"arch": "90"}}}), str(path))
    f = lambda name: '{"name":"%s","type":"function"}' % name  # noqa: E731
    kernel = '{"frame":%s,"metrics":{%s"time (ns)":%d,"count":%d,"device_id":"%s","device_type":"CUDA"},"children":[%s]}'
    # Keys as upstream writes them ("x (exc)" -> "x"); the root's metadata keeps the name the program used.
    expected = ('[{"frame":%s,"metrics":{"count":0,"time (ns)":0},"metadata":{"metric_keys":{"x":"x (exc)"}},'
                '"children":[{"frame":%s,"metrics":{"x":1},'
                '"children":[%s,%s]}]},{"CUDA":{"0":{"arch":"90"}}}]') % (
        f("ROOT"), f("s"), kernel % (f("k"), "", 3, 2, "0", kernel % (f("k_inner"), "", 1, 1, "0", "")),
        kernel % (f("k"), "", 4, 1, "1", ""))
    assert path.read_text() == expected


def test_round_trip_multi_device_exclusive_property_and_deep(tmp_path):
    profile = sample_tree(depth=5000)
    path = tmp_path / "p.hatchet"
    hatchet.write(profile, str(path))
    read = hatchet.read(path)

    assert read.devices == {"CUDA": {"0": {"arch": "90"}, "1": {"arch": "90"}}, "HIP": {"0": {"arch": "gfx942"}}}
    outer = child(read.root, "outer")
    assert outer.metrics == {"bytes": 10, "tokens (n)(exc)": 3, "batch (n)(pty)": 8, "cpu_time (ns)": 500}
    k0 = child(outer, "k", ("CUDA", "0"))
    assert k0.metrics == {"flops16": 100, "time (ns)": 20, "count": 2, "device_id": "0", "device_type": "CUDA"}
    assert child(outer, "k", ("CUDA", "1")).metrics["time (ns)"] == 10
    assert child(outer, "k", ("HIP", "0")).metrics == {"time (ns)": 7, "count": 1, "device_id": "0",
                                                       "device_type": "HIP"}
    assert child(child(outer, "inner"), "k2").metrics["count"] == 1

    node, depth = read.root, 0
    while node.children and node.name != "deep_kernel":
        node = child(node, f"f{depth}") if depth < 5000 else child(node, "deep_kernel")
        depth += 1
    assert (node.name, depth, node.metrics["time (ns)"]) == ("deep_kernel", 5001, 9)

    # The data model and the read file agree on every inclusive sum, through the one implementation.
    keys = ("time (ns)", "count", "bytes")
    sums = subtree_sums(read.root, keys, lambda n, k: n.metrics.get(k, 0), lambda n: n.children)
    tree = profile.tree
    for key in keys:
        assert sums[id(outer)][key] == tree.inclusive(key, tree.find("outer"))
        assert sums[id(read.root)][key] == tree.inclusive(key)
    assert tree.inclusive("time (ns)") == 20 + 10 + 7 + 5 + 9
    assert tree.inclusive("tokens (n)(exc)", tree.find("outer")) == 3
    assert tree.inclusive("cpu_time (ns)", tree.find("outer")) == 500  # not summed with inner's 200

    root, devices = hatchet.read_document(path)  # the raw literal (compared below the deep chain: == recurses)
    literal = hatchet.literal(profile.tree)
    assert root["metrics"] == literal["metrics"] == {"count": 0, "time (ns)": 0}
    assert root["children"][0] == literal["children"][0] and devices == read.devices


def test_any_depth_is_written_and_read_back(tmp_path):
    depth = 20000  # past both the C encoder and the C parser, on every Python
    tree = Tree()
    tree.add_kernel(tuple(f"f{i}" for i in range(depth)), "k", "CUDA", 0, 1, 1)
    path = str(tmp_path / "d.hatchet")
    hatchet.write(Profile("d", "shadow", "tree", tree), path)
    read = hatchet.read(path)
    assert sum(1 for _ in read.root.walk()) == depth + 2  # ROOT, the chain, the kernel


def test_the_flat_encoder_writes_the_same_bytes():
    doc = hatchet.document(sample_tree(depth=40))
    doc[0]["children"].append({"frame": {"name": 'q"\\u00e9'}, "metrics": {"x": float("nan")}, "children": []})
    assert hatchet._dumps_flat(doc) == json.dumps(doc, separators=(",", ":"))


def test_too_deep_to_read_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(hatchet, "MAX_DEPTH", 2000)
    n = 8000
    path = tmp_path / "deep.hatchet"
    path.write_text('[' + '{"frame":{"name":"x"},"children":[' * n + "]}" * n + ',{}]')
    with pytest.raises(hatchet.HatchetError, match="nested too deeply") as err:
        hatchet.read(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


UPSTREAM = """[{"frame": {"name": "ROOT", "type": "function"}, "metrics": {"time (ns)": 0, "count": 0}, "extra": 1,
  "children": [
    {"frame": {"name": "gemm", "type": "function", "file": "a.py"},
     "metrics": {"time (ns)": 100, "count": 1, "device_id": 0, "device_type": "CUDA", "flops16": 2e9,
                 "note": "text", "flag": true, "shape": [1, 2], "ratio": NaN, "peak": Infinity, "low": -Infinity},
     "children": []},
    {"frame": {"name": "a.py:main@3", "type": "python"}, "metrics": {"bytes": 4}}
  ]},
 {"CUDA": {"0": {"arch": "90"}}, "extra": "field"}, "a third entry"]"""


def test_reads_upstream_files_keeping_what_it_understands(tmp_path):
    path = tmp_path / "up.hatchet"
    path.write_text(UPSTREAM)
    read = hatchet.read(path)
    gemm, py = read.root.children
    assert gemm.metrics == {"time (ns)": 100, "count": 1, "device_id": "0", "device_type": "CUDA", "flops16": 2e9}
    assert gemm.device == ("CUDA", "0") and py.device is None
    assert (py.name, py.metrics, py.children) == ("a.py:main@3", {"bytes": 4}, [])
    assert read.devices == {"CUDA": {"0": {"arch": "90"}}, "extra": "field"}
    assert read.metric_keys() == ["time (ns)", "count", "flops16", "bytes"]

    root, devices = hatchet.read_document(path)  # raw: every value as in the file
    assert math.isnan(root["children"][0]["metrics"]["ratio"]) and root["children"][0]["metrics"]["note"] == "text"
    assert devices == read.devices

    bare = tmp_path / "bare.hatchet"
    bare.write_text(json.dumps(json.loads(UPSTREAM.replace("NaN", "0").replace("Infinity", "0"))[0]))
    assert hatchet.read_document(bare)[1] == {}
    assert [c.name for c in hatchet.read(bare).root.children] == ["gemm", "a.py:main@3"]


@pytest.mark.parametrize("content, words", [
    ("[1, 2, 3]", "not a Proton profile (expected a JSON list"),
    ('"text"', "not a Proton profile"),
    ('{"a": 1}', "a node has no 'frame' object"),
    ('[{"frame": {"name": "ROOT"}, "children": [{"metrics": {}}]}, {}]', "a node has no 'frame' object"),
    ('[{"frame": {"name": 3}}]', "a node's frame has no 'name'"),
    ('[{"frame": {"name": "R"}, "metrics": [1]}]', "'metrics' that is not an object"),
    ('[{"frame": {"name": "R"}, "children": {"a": 1}}]', "'children' that is not a list"),
    ("this is not json", "is not JSON (Expecting value at line 1 column 1)"),
    (b"\xff\xfe\x00\x01", "is not JSON (it is binary)"),
])
def test_not_a_profile_is_one_line_naming_the_file(tmp_path, content, words):
    path = tmp_path / "bad.hatchet"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(hatchet.HatchetError) as err:
        hatchet.read(path)
    message = str(err.value)
    assert words in message and str(path) in message and "\n" not in message
    assert isinstance(err.value, ProtonError)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(hatchet.HatchetError, match="no such file: .*missing.hatchet"):
        hatchet.read_document(tmp_path / "missing.hatchet")
    with pytest.raises(hatchet.HatchetError, match="is a directory"):
        hatchet.read(tmp_path)
