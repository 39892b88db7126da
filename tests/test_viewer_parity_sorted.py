"""``--print-sorted`` lists what upstream proton-viewer lists: every frame of the tree but the root.

Upstream (Triton 3.6 ``viewer.print_tree``) sorts its whole frame table by the
first metric, largest first, and skips the first row (the root): scopes,
Python frames and kernels alike, after ``-i``/``-e``/``-t`` and regardless of
``-d``.  The expected lists below are computed that way from the file's numbers.
"""

import json

import pytest

import proton_core as proton
from proton_core import viewer

#: ROOT / train.py:3@main / {fwd / {k1 300, k2 100}, bwd / {k3 240, k4 20}}, plus a kernel under ROOT (no ties)
DOC = [
    {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0}, "children": [
        {"frame": {"name": "/src/train.py:3@main", "type": "python"}, "metrics": {}, "children": [
            {"frame": {"name": "fwd", "type": "function"}, "metrics": {}, "children": [
                {"frame": {"name": "k1", "type": "function"},
                 "metrics": {"time (ns)": 300, "count": 1, "device_id": "0", "device_type": "CUDA"}, "children": []},
                {"frame": {"name": "k2", "type": "function"},
                 "metrics": {"time (ns)": 100, "count": 2, "device_id": "0", "device_type": "CUDA"}, "children": []},
            ]},
            {"frame": {"name": "bwd", "type": "function"}, "metrics": {}, "children": [
                {"frame": {"name": "k3", "type": "function"},
                 "metrics": {"time (ns)": 240, "count": 1, "device_id": "0", "device_type": "CUDA"}, "children": []},
                {"frame": {"name": "k4", "type": "function"},
                 "metrics": {"time (ns)": 20, "count": 1, "device_id": "0", "device_type": "CUDA"}, "children": []},
            ]},
        ]},
        {"frame": {"name": "init_kernel", "type": "function"},
         "metrics": {"time (ns)": 50, "count": 1, "device_id": "0", "device_type": "CUDA"}, "children": []},
    ]},
    {"CUDA": {"0": {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 2619000,
                    "bus_width": 5120}}},
]


def inclusive_times(node, out):
    """Upstream's ``time (ns) (inc)``: a frame's own time plus its subtree's."""
    total = node["metrics"].get("time (ns)", 0) + sum(inclusive_times(k, out) for k in node["children"])
    out[node["frame"]["name"]] = total
    return total


def upstream_sorted(doc, keep=lambda name: True):
    times = {}
    inclusive_times(doc[0], times)
    rows = sorted(((t, n) for n, t in times.items() if keep(n)), key=lambda r: -r[0])
    return [(n, t) for t, n in rows[1:]]  # the first row, the root, is skipped


def listing(capsys, *argv):
    assert viewer.main([str(a) for a in argv]) == 0
    out = capsys.readouterr().out
    title, rest = out.split("kernels sorted by ")[1].split("\n", 1)
    rows = rest.splitlines()[1:]  # below the column header
    return title, [(line.split()[0], float(line.split()[1])) for line in rows]


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "up.hatchet"
    p.write_text(json.dumps(DOC))
    return p


def test_lists_every_frame_but_the_root(capsys, path):
    title, rows = listing(capsys, "-m", "time/ns", "--print-sorted", path)
    assert title == "time/ns:"
    expected = upstream_sorted(DOC)
    assert rows == expected
    assert [n for n, _ in rows] == ["/src/train.py:3@main", "fwd", "k1", "bwd", "k3", "k2", "init_kernel", "k4"]
    assert "ROOT" not in [n for n, _ in rows]


def test_depth_limits_the_tree_not_the_list(capsys, path):
    _, deep = listing(capsys, "-m", "time/ns", "--print-sorted", path)
    _, shallow = listing(capsys, "-m", "time/ns", "--print-sorted", "-d", "2", path)
    assert shallow == deep


def test_filters_apply_to_the_list(capsys, path):
    _, rows = listing(capsys, "-m", "time/ns", "--print-sorted", "-e", "^bwd$", path)
    assert rows == [  # sums over what is left, as upstream's filters squash and re-sum
        ("/src/train.py:3@main", 400.0), ("fwd", 400.0), ("k1", 300.0), ("k2", 100.0), ("init_kernel", 50.0)]
    _, rows = listing(capsys, "-m", "time/ns", "--print-sorted", "-t", "200", path)
    assert [n for n, _ in rows] == ["/src/train.py:3@main", "fwd", "k1", "bwd", "k3"]


def test_percent_first_metric_orders_the_list(capsys, path):
    title, rows = listing(capsys, "-m", "time/%,time/ns", "--print-sorted", path)
    assert title == "time/%:"
    total = 710.0
    assert rows == [(n, pytest.approx(100.0 * t / total, abs=5e-4)) for n, t in upstream_sorted(DOC)]


def test_scopes_of_our_own_profile_are_listed(capsys, tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("a"):
        fake.launch("small", 10)
        fake.launch("large", 900)
    with proton.scope("b"):
        fake.launch("medium", 90)
    proton.finalize()
    _, rows = listing(capsys, "-m", "time/ns", "--print-sorted", tmp_path / "p.hatchet")
    assert rows == [("a", 910.0), ("large", 900.0), ("b", 90.0), ("medium", 90.0), ("small", 10.0)]


def test_frames_without_a_value_come_last(capsys, tmp_path):
    """cpu_time is exclusive: a scope without it has no value, and is listed after those with one."""
    proton.start(str(tmp_path / "h"), backend="host")
    with proton.scope("outer"):
        with proton.cpu_timed_scope("timed"):
            pass
    proton.finalize()
    assert viewer.main(["-m", "cpu_time/ns", "--print-sorted", str(tmp_path / "h.hatchet")]) == 0
    rows = capsys.readouterr().out.split("kernels sorted by cpu_time/ns:")[1].strip().splitlines()[1:]
    assert [r.split()[0] for r in rows] == ["timed", "outer"]
    assert rows[1].split()[1] == "-"
