"""Kernel records land under the right paths, with exact counts and times."""

import threading

import pytest

import proton_core as proton
from proton_core.testing import child as node, load_profile as load


def test_nested_scopes_exact_counts_and_times(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("test0"):
        with proton.scope("test1"):
            for _ in range(5):
                fake.launch("foo", 100)
    with proton.scope("test2"):
        fake.launch("foo", 7)
    proton.finalize()
    root, devices = load(tmp_path / "p.hatchet")
    k = node(root, "test0", "test1", "foo")["metrics"]
    assert (k["count"], k["time (ns)"], k["device_id"], k["device_type"]) == (5, 500, "0", "CUDA")
    assert node(root, "test2", "foo")["metrics"]["time (ns)"] == 7
    assert devices["CUDA"]["0"]["num_sms"] == 132
    assert root["metrics"] == {"count": 0, "time (ns)": 0}


def test_state_is_a_suffix(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("test"):
        with proton.state("state0"):
            with proton.scope("test0"):
                fake.launch("foo0")
            with proton.scope("test1"):
                fake.launch("foo1")
        fake.launch("foo2")
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "test", "test1", "state0", "foo1")["metrics"]["count"] == 1
    assert node(root, "test", "test0", "state0", "foo0")["metrics"]["count"] == 1
    assert node(root, "test", "foo2")["metrics"]["count"] == 1


def test_threads_keep_their_own_scopes(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    barrier = threading.Barrier(4)

    def work(i):
        with proton.scope(f"thread{i}"):
            barrier.wait()
            for _ in range(100 + i):
                fake.launch(f"k{i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    for i in range(4):
        scope = node(root, f"thread{i}")
        assert [c["frame"]["name"] for c in scope["children"]] == [f"k{i}"]
        assert scope["children"][0]["metrics"]["count"] == 100 + i


def test_graph_replay_under_captured_at(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("graph"):
        graph = fake.backend.capture([("k1", 10), ("k2", 20)])
    proton.deactivate()
    fake.backend.replay(graph)  # inactive: not recorded
    proton.activate()
    with proton.scope("graph_launch"):
        for _ in range(3):
            fake.backend.replay(graph)
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    k1 = node(root, "graph_launch", "<captured_at>", "graph", "k1")["metrics"]
    assert (k1["count"], k1["time (ns)"]) == (3, 30)
    assert node(root, "graph_launch", "<captured_at>", "graph", "k2")["metrics"]["count"] == 3


def test_deactivated_launches_are_not_recorded(tmp_path, fake):
    sid = proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("a")
    proton.deactivate(sid)
    fake.launch("a")
    proton.activate(sid)
    fake.launch("a")
    proton.finalize(sid)
    root, _ = load(tmp_path / "p.hatchet")
    assert node(root, "a")["metrics"]["count"] == 2


def test_two_sessions_each_get_their_own_output(tmp_path, fake):
    a = proton.start(str(tmp_path / "a"), backend="fake")
    fake.launch("k")
    b = proton.start(str(tmp_path / "b"), backend="fake")
    fake.launch("k")
    proton.deactivate(a)
    fake.launch("k")
    proton.finalize(a)
    fake.launch("k")
    proton.finalize(b)
    assert node(load(tmp_path / "a.hatchet")[0], "k")["metrics"]["count"] == 2
    assert node(load(tmp_path / "b.hatchet")[0], "k")["metrics"]["count"] == 3


def test_devices_split_into_sibling_nodes(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k", 5, device=0)
    fake.launch("k", 6, device=1)
    proton.finalize()
    root, devices = load(tmp_path / "p.hatchet")
    ks = sorted((c["metrics"]["device_id"], c["metrics"]["time (ns)"]) for c in root["children"])
    assert ks == [("0", 5), ("1", 6)]
    assert set(devices["CUDA"]) == {"0", "1"}


def test_python_context_paths(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake", context="python")

    def inner():
        fake.backend.launch("k")

    inner()
    proton.finalize()
    root, _ = load(tmp_path / "p.hatchet")
    names = []
    cur = root
    while cur["children"]:
        cur = cur["children"][0]
        names.append(cur["frame"]["name"])
    assert names[-1] == "k"
    assert names[-2].endswith(f":{inner.__code__.co_firstlineno + 1}@inner")  # file:line@function
    assert names[-2].startswith(__file__)
    assert not any("proton_core" in n or "fake_backend" in n for n in names)


def test_dropped_records_are_reported(tmp_path, fake, caplog):
    proton.start(str(tmp_path / "p"), backend="fake")
    fake.launch("k")
    fake.backend.dropped = 3
    proton.finalize()
    assert [(r.name, r.levelname) for r in caplog.records] == [("proton", "WARNING")]
    assert "dropped 3 activity records" in caplog.records[0].getMessage()
    assert load(tmp_path / "p.hatchet")[0]["metrics"]["dropped"] == 3  # the file says it is short
