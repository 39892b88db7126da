"""File parity with upstream Proton, both ways (decision 0210).

Our files hold metric keys as upstream writes them (``"a (exc)"`` as ``"a"``) and
mark inclusive metrics on the root, as upstream's viewer needs; our viewer reads
upstream's files (``tests/data/upstream/``, JSON and ``hatchet_msgpack``) with the
numbers Triton's ``proton-viewer`` gets (``expected.json``), never summing
exclusive metrics or properties up the tree.  Triton's own viewer on our files:
``test_file_parity_triton.py`` (local only).
"""

import json
import math
import os

import msgpack
import pytest

import proton_core as proton
from proton_core import viewer
from proton_core.formats import hatchet, hatchet_msgpack, keys
from proton_core.metrics import parse_name
from proton_core.model import Profile, Tree
from proton_core.testing import load_profile
from proton_core.viewer import combine, derive
from proton_core.viewer.table import read as read_table

DATA = os.path.join(os.path.dirname(__file__), "data", "upstream")
EXPECTED = json.load(open(os.path.join(DATA, "expected.json")))
METRICS = sorted(EXPECTED["metrics"])
KERNEL_METRICS = {"flops16": 4.0e9, "bytes": 2.0e6}


# ------------------------------------------------------------------ helpers ----
def our_values(table, metrics) -> dict:
    """``{metric: {node path: value or None}}`` as our viewer computes the columns it prints."""
    order, parent = table.walk()
    paths: dict[int, str] = {}
    for i in order:
        p = parent[i]
        paths[i] = table.names[i] if p < 0 else f"{paths[p]}/{table.names[i]}"
    columns = derive.Columns(table, order, parent)
    out = {}
    for metric in metrics:
        values = columns.compute(metric)
        out[metric] = {paths[i]: (None if values[i] != values[i] else values[i]) for i in order}
    return out


def assert_same(ours: dict, theirs: dict) -> None:
    """Every node Triton's viewer shows has our value; nodes it drops (empty ones) have none of ours."""
    for metric, expected in theirs.items():
        got = ours[metric]
        for path, value in expected.items():
            assert path in got, (metric, path, sorted(got))
            if value is None:
                assert got[path] is None, (metric, path, got[path])
            else:
                assert got[path] == pytest.approx(value, rel=1e-9), (metric, path)
        for path in set(got) - set(expected):
            assert got[path] is None, (metric, path, got[path])


def metrics(**values):
    return [(parse_name(k, allow_reserved=True), v) for k, v in values.items()]


#: the kernel times upstream measured for the fixture, given to the fake backend's kernels
KERNEL_NS = {k: int(EXPECTED["metrics"]["time/ns"][f"ROOT/test0/{p}"]) for k, p in
             (("kernel_a", "kernel_a"), ("kernel_b", "test1/kernel_b"))}


def run_workload(fake, *sessions_args):
    """The workload of scripts/upstream_fixtures.py on the fake backend (kernels carry flops16/bytes and the
    times upstream measured)."""
    ids = [proton.start(*args, backend="fake", **kw) for args, kw in sessions_args]

    def launch(name, flops16, nbytes):
        fake.launch(name, KERNEL_NS[name], inner=[((), {"flops16": flops16, "bytes": nbytes})])

    with proton.scope("test0", {"u": 2.0, "a (exc)": 1.0, "p (pty)": 3.0}):
        launch("kernel_a", 4.0e9, 2.0e6)
        with proton.scope("test1", {"u": 5.0, "p (pty)": 7.0}):
            launch("kernel_b", 1.0e9, 8.0e6)
    with proton.scope("test1", {"u": 1.0, "a (exc)": 6.0, "p (pty)": 1.0}):
        pass
    return ids


# ------------------------------------------------------- upstream's files, ours ----
@pytest.mark.parametrize("name", ["upstream.hatchet", "upstream.hatchet_msgpack"])
def test_our_viewer_reads_upstreams_files_as_tritons_viewer(name):
    """Time, count, flops, bytes, a user metric given inclusive, exclusive, property: Triton's numbers."""
    table = read_table(os.path.join(DATA, name))
    assert_same(our_values(table, METRICS), EXPECTED["metrics"])
    # upstream's file says nothing but the root: what the root lacks (the exclusive a) is never summed;
    # Triton 3.6 marks every other key there, the property p too, so both viewers sum those
    assert table.kinds == {"a": "exc"}
    assert EXPECTED["metrics"]["a"]["ROOT"] is None and EXPECTED["metrics"]["a"]["ROOT/test0"] == 1.0
    assert EXPECTED["metrics"]["time/ns"]["ROOT"] == pytest.approx(sum(KERNEL_NS.values()))


def test_the_viewer_prints_upstreams_exclusive_metrics_per_node(capsys):
    path = os.path.join(DATA, "upstream.hatchet")
    assert viewer.main(["-m", "a,u,time/ns", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    (root,) = [line.split()[:3] for line in lines if " ROOT" in line]
    (test0,) = [line.split()[:3] for line in lines if line.endswith("test0")]
    total = sum(KERNEL_NS.values())
    assert test0 == ["1.000", "7.000", f"{total:.3f}"]  # u marked on upstream's root: summed (2 + 5)
    assert root == ["-", "8.000", f"{total:.3f}"]  # a, not marked: never summed (it was 7.000)


def test_the_msgpack_fixture_is_the_json_fixture():
    with open(os.path.join(DATA, "upstream.hatchet_msgpack"), "rb") as f:
        packed = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    assert packed == json.load(open(os.path.join(DATA, "upstream.hatchet")))
    assert hatchet.read_document(os.path.join(DATA, "upstream.hatchet_msgpack")) == packed  # untouched: not ours


def test_our_packer_writes_the_msgpack_librarys_bytes():
    """Node by node (any depth), yet byte for byte what msgpack.packb and upstream's writer give."""
    with open(os.path.join(DATA, "upstream.hatchet_msgpack"), "rb") as f:
        data = f.read()
    doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
    assert hatchet_msgpack.packb(doc) == msgpack.packb(doc, use_bin_type=True) == data


def test_merged_upstream_files_keep_their_kinds(tmp_path):
    path = os.path.join(DATA, "upstream.hatchet")
    merged = combine.merge(read_table(path), read_table(path))
    values = our_values(merged, ["a", "u", "time/ns"])
    assert values["a"]["ROOT"] is None and values["a"]["ROOT/test1"] == 12.0
    assert values["u"]["ROOT/test0"] == 14.0 and values["u"]["ROOT"] == 16.0
    assert values["time/ns"]["ROOT"] == 2 * sum(KERNEL_NS.values())


def test_read_profile_of_an_upstream_file_knows_the_kinds():
    read = hatchet.read(os.path.join(DATA, "upstream.hatchet_msgpack"))
    assert not read.is_inclusive("a") and read.is_inclusive("u") and read.is_inclusive("time (ns)")
    assert sorted(c.name for c in read.root.children) == ["host", "test0", "test1"]


# ---------------------------------------------------- our files, as upstream's ----
def test_keys_are_written_as_upstream_writes_them(tmp_path):
    """Upstream's test_scope_exclusive and test_scope_properties, on the raw file."""
    proton.start(str(tmp_path / "x"))
    with proton.scope("test0", metrics={"a (exc)": 1}):
        with proton.scope("test1", metrics={"b (exc)": 1, "c (pty)": 2.0}):
            pass
    proton.finalize()
    doc = json.load(open(tmp_path / "x.hatchet"))
    assert doc[0]["metrics"] == {}  # neither metric on the root
    test0 = doc[0]["children"][0]
    assert test0["metrics"] == {"a": 1}
    assert test0["children"][0]["metrics"] == {"b": 1, "c": 2.0}
    assert doc[0]["metadata"]["metric_keys"] == {"a": "a (exc)", "b": "b (exc)", "c": "c (pty)"}
    # our readers get the program's names back
    (test0,) = hatchet.read(tmp_path / "x.hatchet").root.children
    assert test0.metrics == {"a (exc)": 1} and test0.children[0].metrics == {"b (exc)": 1, "c (pty)": 2.0}


def test_inclusive_metrics_are_marked_on_the_root(tmp_path, fake):
    run_workload(fake, ((str(tmp_path / "p"),), {}))
    proton.finalize()
    root = json.load(open(tmp_path / "p.hatchet"))[0]
    assert root["metrics"] == {"count": 0, "time (ns)": 0, "u": 0, "flops16": 0, "bytes": 0}
    assert sorted(root["metadata"]["root_marks"]) == ["bytes", "flops16", "u"]
    assert list(root)[-1] == "children"
    # our readers drop the marks: the root's own value stays absent
    assert load_profile(tmp_path / "p.hatchet")[0]["metrics"] == {"count": 0, "time (ns)": 0}
    table = read_table(tmp_path / "p.hatchet")
    assert table.cols["u"][table.root] != table.cols["u"][table.root]  # NaN


def test_our_numbers_on_our_file_match_upstreams_on_theirs(tmp_path, fake):
    """The same workload: our viewer on our file gives Triton's numbers on upstream's file where
    upstream's file holds what ours does (time, count, exclusive, property; kernel times made equal)."""
    run_workload(fake, ((str(tmp_path / "p"),), {}))
    proton.finalize()
    ours = our_values(read_table(tmp_path / "p.hatchet"), ["time/ns", "count", "a", "p", "avg_time/ns"])
    for metric in ("time/ns", "count", "a", "avg_time/ns"):
        assert_same({metric: ours[metric]}, {metric: {k: v for k, v in EXPECTED["metrics"][metric].items()
                                                      if not k.endswith("host")}})
    # a property stays per node in ours; Triton 3.6 marks it on its root and sums it (docs/compat.md)
    assert ours["p"]["ROOT/test0"] == 3.0 and ours["p"]["ROOT"] is None
    assert EXPECTED["metrics"]["p"]["ROOT/test0"] == 10.0
    # an inclusive user metric and kernel flops: ours sums them (marked on the root, Triton's viewer too)
    ours = our_values(read_table(tmp_path / "p.hatchet"), ["u", "flops16"])
    assert ours["u"]["ROOT"] == 8.0 and ours["u"]["ROOT/test0"] == 7.0
    assert ours["flops16"]["ROOT/test0"] == 5.0e9


def test_msgpack_output_is_the_json_document(tmp_path, fake):
    s1, s2 = run_workload(fake, ((str(tmp_path / "j"),), {}), ((str(tmp_path / "m"),), {}))
    proton.finalize(s1, output_format="hatchet")
    proton.finalize(s2, output_format="hatchet_msgpack")
    assert (tmp_path / "m.hatchet_msgpack").exists() and not (tmp_path / "m.hatchet").exists()
    with open(tmp_path / "m.hatchet_msgpack", "rb") as f:
        packed = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    text = json.load(open(tmp_path / "j.hatchet"))
    for doc in (packed, text):
        doc[0]["metadata"].pop("name")
    assert packed == text
    a, b = read_table(tmp_path / "j.hatchet"), read_table(tmp_path / "m.hatchet_msgpack")
    assert our_values(a, ["time/ns", "u", "a", "p"]) == our_values(b, ["time/ns", "u", "a", "p"])


def test_the_viewer_reads_msgpack_from_the_command_line(tmp_path, fake, capsys):
    (s,) = run_workload(fake, ((str(tmp_path / "m"),), {"output_format": "hatchet_msgpack"}))
    proton.finalize(s)
    assert viewer.main(["-m", "a,time/ns", str(tmp_path / "m.hatchet_msgpack")]) == 0
    out = capsys.readouterr().out
    assert "kernel_b" in out and f"{sum(KERNEL_NS.values()):.3f}" in out


def test_old_files_with_suffixed_keys_read_as_new_ones(tmp_path, fake):
    run_workload(fake, ((str(tmp_path / "new"),), {}))
    proton.finalize()
    old = load_profile(tmp_path / "new.hatchet")  # the document as before: suffixed keys, no marks
    old[0]["metadata"] = {"name": "new", "writer": "proton-profiler 0.1.0"}
    (tmp_path / "old.hatchet").write_text(json.dumps(old))
    assert '"a (exc)"' in (tmp_path / "old.hatchet").read_text()
    want = ["time/ns", "count", "u", "a", "p", "flops16", "bytes"]
    new_table, old_table = read_table(tmp_path / "new.hatchet"), read_table(tmp_path / "old.hatchet")
    assert sorted(new_table.cols) == sorted(old_table.cols)
    assert our_values(new_table, want) == our_values(old_table, want)
    assert our_values(old_table, ["a"])["a"]["ROOT"] is None  # "(exc)" still never summed


def test_a_cut_key_that_would_clash_keeps_its_suffix(tmp_path):
    tree = Tree()
    tree.add_metrics(("s",), metrics(**{"a": 1, "a (exc)": 2, "b (exc)": 3, "b (pty)": 4, "c (exc)": 5}))
    assert keys.file_names({"a", "a (exc)", "b (exc)", "b (pty)", "c (exc)"}) == {"c (exc)": "c"}
    path = tmp_path / "c.hatchet"
    hatchet.write(Profile("c", "shadow", "tree", tree), str(path))
    (s,) = json.load(open(path))[0]["children"]
    assert s["metrics"] == {"a": 1, "a (exc)": 2, "b (exc)": 3, "b (pty)": 4, "c": 5}
    (s,) = hatchet.read(path).root.children
    assert s.metrics == {"a": 1, "a (exc)": 2, "b (exc)": 3, "b (pty)": 4, "c (exc)": 5}


def test_units_and_spellings_are_cut_as_upstream_cuts_them():
    names = keys.file_names({"bytes (B)(exc)", "tokens (n)(pty)", "m (exc)", "cpu_time (ns)", "x (inc)"})
    assert names == {"bytes (B)(exc)": "bytes (B)", "tokens (n)(pty)": "tokens (n)", "m (exc)": "m"}


def test_msgpack_of_any_depth_is_written_and_read(tmp_path):
    depth = 3000  # past the msgpack library's own nesting limits, both ways
    tree = Tree()
    chain = tuple(f"f{i}" for i in range(depth))
    tree.add_kernel(chain, "k", "CUDA", 0, 9, 1)
    tree.add_metrics(chain[:2], metrics(**{"x (exc)": 1}))
    path = tmp_path / "d.hatchet_msgpack"
    hatchet_msgpack.write(Profile("d", "shadow", "tree", tree), str(path))
    read = hatchet.read(path)
    assert sum(1 for _ in read.root.walk()) == depth + 2
    assert read.root.children[0].children[0].metrics == {"x (exc)": 1}
    table = read_table(path)
    assert table.size == depth + 2 and our_values(table, ["time/ns"])["time/ns"]["ROOT"] == 9


def test_a_broken_msgpack_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.hatchet_msgpack"
    path.write_bytes(b"\x92\x83\xa5frame\xc1")
    assert viewer.main(["-m", "time/ns", str(path)]) != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "bad.hatchet_msgpack" in err


def test_expected_numbers_say_where_they_come_from():
    assert EXPECTED["source"] and "proton-viewer" in EXPECTED["viewer"]
    assert set(METRICS) >= {"time/ns", "count", "flops16", "bytes", "u", "a", "p"}
    assert all(v is None or math.isfinite(v) for m in EXPECTED["metrics"].values() for v in m.values())


def test_the_flame_graph_draws_no_exclusive_metric_of_an_upstream_file():
    """An upstream file's keys the root lacks are exclusive: --html/--speedscope never sum them."""
    from proton_core.viewer import flame
    from proton_core.viewer.table import read

    table = read(os.path.join(os.path.dirname(__file__), "data", "upstream", "upstream.hatchet"))
    drawn = flame.additive(["time (ns)", "count", "a", "u", "p"], table.kinds)
    assert drawn[0] == "time (ns)" and {"count", "u"} <= set(drawn)  # marked on upstream's root: summed there too
    assert "a" not in drawn  # not marked: summed, it would draw widths upstream's viewer never shows
    assert {"a", "u"} <= set(flame.additive(["a", "u"]))  # without the file's kinds: our own files' rule


def test_list_names_an_upstream_files_unmarked_keys_exclusive(capsys):
    from proton_core.viewer import main

    assert main(["-l", os.path.join(os.path.dirname(__file__), "data", "upstream", "upstream.hatchet")]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.split() and l.split()[0] == "a")
    assert "exclusive" in line, out


def test_instruction_samples_are_written_as_upstreams_num_samples_and_read_back(tmp_path, fake):
    """upstream's test_pcsampling reads ``num_samples`` from the file; our readers give the program's name back."""
    line = "/src/kern.py:12@kern"
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("test"):
        fake.launch("foo", 100, inner=[((line,), {"samples": 7})])
    proton.finalize()
    raw = json.loads((tmp_path / "p.hatchet").read_text())[0]
    line_node = raw["children"][0]["children"][0]["children"][0]
    assert line_node["frame"]["name"] == line and line_node["metrics"] == {"num_samples": 7}
    assert raw["metadata"][keys.NAMES_KEY]["num_samples"] == "samples"
    assert load_profile(tmp_path / "p.hatchet")[0]["children"][0]["children"][0]["children"][0]["metrics"] == \
        {"samples": 7}
    table = read_table(str(tmp_path / "p.hatchet"))
    assert "samples" in table.cols and "num_samples" not in table.cols
