"""The native recorder through its binding: what the CUPTI callbacks do per
launch and per record, fed with synthetic launches and kernel records."""

import threading

import pytest

from proton_core.plugin_api import NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME
from cupti_helpers import CorrelationIds
from proton_core.testing import chains

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(
    not hasattr(_cupti, "_test_reset"),
    reason="proton_cupti._cupti was built without its test bindings (CMake option PROTON_CUPTI_TESTING=OFF, "
           "as in release wheels); rebuild with SKBUILD_CMAKE_DEFINE=PROTON_CUPTI_TESTING=ON pip install -e "
           "plugins/cupti (scripts/install.sh does)")


@pytest.fixture
def rec():
    _cupti._test_reset()
    _cupti.configure(False, False, [], [])
    _cupti.set_epoch(0)
    _cupti.set_context(0)
    yield _cupti
    _cupti.set_epoch(0)
    _cupti.configure(False, False, [], [])
    _cupti._test_reset()


corr = CorrelationIds(1000)


def test_aggregates_by_epoch_node_kernel_device(rec):
    rec.set_epoch(1)
    rec.set_context(5)
    c1 = corr()
    rec._test_launch(c1)
    rec._test_kernel(c1, "kA", device=0, start=100, end=350)
    c2 = corr()
    rec._test_launch(c2)
    rec._test_kernel(c2, "kA", device=0, start=400, end=500)
    rec._test_kernel(c2, "kA", device=1, start=0, end=7)
    rec.set_context(9)
    c3 = corr()
    rec._test_launch(c3)
    rec._test_kernel(c3, "kB", start=10, end=30)
    rec.set_epoch(2)
    c4 = corr()
    rec._test_launch(c4)
    rec._test_kernel(c4, "kB", start=0, end=1)
    nodes, records, events, dropped, devices = rec._test_flush()
    ids = {v: nid for nid, parent, kind, v in nodes if kind == NODE_CONTEXT and parent == 0}
    assert set(ids) == {5, 9}
    got = sorted(records)
    assert got == sorted([
        (1, ids[5], "kA", 0, 350, 2),
        (1, ids[5], "kA", 1, 7, 1),
        (1, ids[9], "kB", 0, 20, 1),
        (2, ids[9], "kB", 0, 1, 1),
    ])
    assert events == [] and dropped == 0 and sorted(devices) == [0, 1]
    # A second flush delivers nothing twice.
    assert rec._test_flush()[:4] == ([], [], [], 0)


def test_kernel_names_are_interned_by_content(rec):
    rec.set_epoch(1)
    c = corr()
    rec._test_launch(c)
    name = "".join(["my", "_kernel"])
    rec._test_kernel(c, name, start=0, end=2)
    rec._test_kernel(c, "my_kernel", start=0, end=3)
    _, records, _, _, _ = rec._test_flush()
    assert [(r[2], r[4], r[5]) for r in records] == [("my_kernel", 5, 2)]


def test_epoch_zero_records_nothing_and_drops_nothing(rec):
    c = corr()
    rec._test_launch(c)  # no session listens
    rec._test_kernel(c, "k", start=0, end=10)
    nodes, records, _, dropped, _ = rec._test_flush()
    assert (nodes, records, dropped) == ([], [], 0)


def test_unknown_or_overwritten_launch_is_counted_dropped(rec):
    rec.set_epoch(1)
    rec._test_kernel(corr(), "never_launched")
    c = corr()
    rec._test_launch(c)
    rec._test_launch(c + rec.SLOTS)  # a much later launch reuses the slot
    rec._test_kernel(c, "stale")
    _, records, _, dropped, _ = rec._test_flush()
    assert records == [] and dropped == 2
    assert rec._test_flush()[3] == 0


def test_trace_events_carry_launch_time_and_thread(rec):
    import time

    rec.configure(False, True, [], [])
    rec.set_epoch(4)
    rec.set_context(3)
    before = time.monotonic_ns()
    c = corr()
    rec._test_launch(c)
    after = time.monotonic_ns()
    rec._test_kernel(c, "k", device=0, stream=13, start=after + 5, end=after + 25)
    nodes, records, events, _, _ = rec._test_flush()
    (ev,) = events
    epoch, node, name, device, stream, start, end, launch, tid = ev
    assert (epoch, name, device, stream, start, end) == (4, "k", 0, 13, after + 5, after + 25)
    assert before <= launch <= after
    assert tid == threading.get_native_id()
    assert records == [(4, node, "k", 0, 20, 1)]


def test_threads_keep_their_own_context(rec):
    rec.set_epoch(1)
    barrier = threading.Barrier(4)
    ids = {}
    lock = threading.Lock()

    def work(i):
        rec.set_context(100 + i)
        barrier.wait()
        for _ in range(50 + i):
            with lock:
                c = corr()
            rec._test_launch(c)
            with lock:
                ids.setdefault(i, []).append(c)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, cs in ids.items():
        for c in cs:
            rec._test_kernel(c, "k", start=0, end=1)
    nodes, records, _, dropped, _ = rec._test_flush()
    ctx_of = {nid: v for nid, _, kind, v in nodes if kind == NODE_CONTEXT}
    counts = {ctx_of[r[1]]: r[5] for r in records}
    assert counts == {100: 50, 101: 51, 102: 52, 103: 53} and dropped == 0


def launch_from_user_code(rec, c):
    rec._test_launch(c)


def test_python_frames_export_file_line_function(rec):
    import inspect

    rec.configure(True, False, [], [])
    rec.set_epoch(1)
    rec.set_context(7)
    c = corr()
    line = inspect.currentframe().f_lineno + 1
    launch_from_user_code(rec, c)
    rec._test_kernel(c, "k", start=0, end=4)
    nodes, records, _, _, _ = rec._test_flush()
    (record,) = records
    chain = chains(nodes)[record[1]]
    assert chain[-1] == (NODE_CONTEXT, 7)
    frames = [v for kind, v in chain if kind == NODE_FRAME]
    assert all(kind == NODE_FRAME for kind, _ in chain[:-1])
    here = f"{__file__}:{line}@test_python_frames_export_file_line_function"
    callee = f"{__file__}:{inspect.getsourcelines(launch_from_user_code)[1] + 1}@launch_from_user_code"
    assert frames[-2:] == [here, callee]  # outermost first, innermost last


def test_python_frames_hide_internal_paths(rec):
    import os

    rec.configure(True, False, [], [__file__])  # this file is "internal" now
    rec.set_epoch(1)
    c = corr()
    launch_from_user_code(rec, c)
    rec._test_kernel(c, "k")
    nodes, records, _, _, _ = rec._test_flush()
    frames = [v for kind, v in chains(nodes)[records[0][1]] if kind == NODE_FRAME]
    assert frames and not any(f.startswith(__file__) for f in frames)
    rec.configure(True, False, [os.path.dirname(__file__) + os.sep], [])
    c = corr()
    launch_from_user_code(rec, c)
    rec._test_kernel(c, "k")
    more, records, _, _, _ = rec._test_flush()
    frames = [v for kind, v in chains(nodes + more)[records[0][1]] if kind == NODE_FRAME]
    assert not any(os.path.dirname(__file__) in f for f in frames)


def test_graph_replay_is_rerooted_under_captured_at(rec):
    rec.set_epoch(1)
    rec.set_context(21)  # capture path
    rec._test_graph_node(501)
    rec._test_graph_node(502)
    rec._test_graph_clone(601, 501)  # instantiation clones the nodes
    rec._test_graph_clone(602, 502)
    rec._test_graph_clone(603, 999)  # a clone of a node never seen: no capture path
    rec.set_context(22)  # launch path
    replays = 3
    for _ in range(replays):
        c = corr()
        rec._test_launch(c)  # cuGraphLaunch
        rec._test_kernel(c, "g1", start=0, end=10, graph_node_id=601)
        rec._test_kernel(c, "g2", start=0, end=20, graph_node_id=602)
        rec._test_kernel(c, "g3", start=0, end=30, graph_node_id=603)
    nodes, records, _, dropped, _ = rec._test_flush()
    chain = chains(nodes)
    got = {r[2]: (chain[r[1]], r[4], r[5]) for r in records}
    under = ((NODE_CONTEXT, 22), (NODE_CAPTURED_AT, None), (NODE_CONTEXT, 21))
    assert got["g1"] == (under, 30, replays)
    assert got["g2"] == (under, 60, replays)
    assert got["g3"] == (((NODE_CONTEXT, 22),), 90, replays)
    assert dropped == 0


def test_graph_captured_while_inactive_has_no_capture_path(rec):
    rec._test_graph_node(701)  # epoch 0: not profiling during capture
    rec.set_epoch(1)
    rec.set_context(3)
    c = corr()
    rec._test_launch(c)
    rec._test_kernel(c, "g", graph_node_id=701)
    nodes, records, _, _, _ = rec._test_flush()
    assert chains(nodes)[records[0][1]] == ((NODE_CONTEXT, 3),)


def test_reset_starts_a_fresh_trie(rec):
    rec.set_epoch(1)
    rec.set_context(5)
    c = corr()
    rec._test_launch(c)
    rec._test_kernel(c, "k")
    first = rec._test_flush()[0]
    rec._test_reset()  # what start() does: the core forgot every node
    c = corr()
    rec._test_launch(c)  # the thread's cached node must not survive the reset
    rec._test_kernel(c, "k")
    nodes, records, _, _, _ = rec._test_flush()
    assert nodes == first == [(1, 0, NODE_CONTEXT, 5)] and records[0][1] == 1


def test_contexts_that_alternate_keep_their_nodes_and_none_survives_a_reset(rec):
    """Each thread remembers the trie node of the contexts it launched under (a native source changes
    the context at most launches): every launch must still land on its own context's node, and after a
    reset on a node of the fresh trie."""
    rec.set_epoch(1)
    contexts = [5, 9, 2**41 + 3, 5, 9, 2**41 + 3, 9]
    for i, ctx in enumerate(contexts):
        rec.set_context(ctx)
        c = corr()
        rec._test_launch(c)
        rec._test_kernel(c, f"k{i}")
    nodes, records, _, _, _ = rec._test_flush()
    ids = {v: nid for nid, parent, kind, v in nodes if kind == NODE_CONTEXT}
    assert len(ids) == 3
    assert sorted((name, node) for _, node, name, *_ in records) == sorted(
        (f"k{i}", ids[ctx]) for i, ctx in enumerate(contexts))
    rec._test_reset()
    for ctx, name in ((2**41 + 3, "after0"), (5, "after1")):  # remembered before the reset: interned anew
        rec.set_context(ctx)
        c = corr()
        rec._test_launch(c)
        rec._test_kernel(c, name)
    nodes, records, _, _, _ = rec._test_flush()
    assert sorted(nodes) == [(1, 0, NODE_CONTEXT, 2**41 + 3), (2, 0, NODE_CONTEXT, 5)]
    assert sorted((name, node) for _, node, name, *_ in records) == [("after0", 1), ("after1", 2)]


def test_many_records_aggregate_to_one_row(rec):
    rec.set_epoch(1)
    base = corr()
    for i in range(1, 20001):
        rec._test_launch(base + i)
        rec._test_kernel(base + i, "hot", start=0, end=3)
    corr.next = base + 20001
    _, records, _, dropped, _ = rec._test_flush()
    assert [(r[2], r[4], r[5]) for r in records] == [("hot", 60000, 20000)] and dropped == 0


def frame_names(rec, c):
    """The NODE_FRAME names above the record of correlation id c (flushes)."""
    rec._test_kernel(c, "k")
    nodes, records, _, _, _ = rec._test_flush()
    frame_names.nodes = getattr(frame_names, "nodes", []) + nodes
    (record,) = records
    return [v for kind, v in chains(frame_names.nodes)[record[1]] if kind == NODE_FRAME]


def test_python_frames_without_the_gil_from_new_code(rec):
    """A framework releases the GIL before launching: the frames are still the
    launching thread's, with their lines, also for code never seen before."""
    frame_names.nodes = []
    rec.configure(True, False, [], [])
    rec.set_epoch(1)
    scope = {"rec": rec}
    src = "def fresh_launcher(c):\n    x = 1\n    rec._test_launch_nogil(c)\n"
    exec(compile(src, "fresh_module.py", "exec"), scope)
    c = corr()
    scope["fresh_launcher"](c)
    names = frame_names(rec, c)
    assert names[-1] == "fresh_module.py:3@fresh_launcher"
    me = "test_python_frames_without_the_gil_from_new_code"
    assert names[-2].startswith(f"{__file__}:") and names[-2].endswith(f"@{me}")


def test_python_frames_follow_each_launch_site_and_reuse_nodes(rec):
    """Launches from another line get their own path; the same site again adds no node."""
    import inspect

    frame_names.nodes = []
    rec.configure(True, False, [], [])
    rec.set_epoch(1)
    first = inspect.currentframe().f_lineno + 1
    c1 = corr(); rec._test_launch_nogil(c1)  # noqa: E702
    c2 = corr(); rec._test_launch_nogil(c2)  # noqa: E702
    me = "test_python_frames_follow_each_launch_site_and_reuse_nodes"
    assert frame_names(rec, c1)[-1] == f"{__file__}:{first}@{me}"
    assert frame_names(rec, c2)[-1] == f"{__file__}:{first + 1}@{me}"
    counts = []
    for _ in range(3):
        for _ in range(200):
            c = corr()
            rec._test_launch_nogil(c)
            rec._test_kernel(c, "k")
        counts.append(rec._test_node_count())
    # The interpreter may re-specialise a call site once (a second instruction
    # offset on the same line), but a site that keeps launching adds nothing.
    assert counts[0] == counts[1] == counts[2], counts
    rec.set_context(5)  # same stack, another scope: a new leaf under the same frames
    c = corr()
    rec._test_launch_nogil(c)
    rec._test_kernel(c, "k")
    nodes, records, _, _, _ = rec._test_flush()
    ctx = {r[1]: chains(frame_names.nodes + nodes)[r[1]][-1] for r in records}
    assert (NODE_CONTEXT, 5) in ctx.values() and (NODE_CONTEXT, 0) in ctx.values()


def test_python_frames_of_a_thread_while_another_runs_python(rec):
    """Each launching thread reads its own stack, GIL or not, while others run."""
    frame_names.nodes = []
    rec.configure(True, False, [], [])
    rec.set_epoch(1)
    ids = {}
    stop = threading.Event()

    def busy():
        x = 0
        while not stop.is_set():
            x += 1

    def worker_launches(name):
        mine = []
        for _ in range(2000):
            c = corr()
            rec._test_launch_nogil(c)
            mine.append(c)
        ids[name] = mine

    spinner = threading.Thread(target=busy)
    spinner.start()
    threads = [threading.Thread(target=worker_launches, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    spinner.join()
    for mine in ids.values():
        for c in mine:
            rec._test_kernel(c, "k")
    nodes, records, _, _, _ = rec._test_flush()
    assert sum(r[5] for r in records) == 6000
    for r in records:
        names = [v for kind, v in chains(nodes)[r[1]] if kind == NODE_FRAME]
        assert names[-1].endswith("@worker_launches"), names
        assert not any("busy" in n for n in names)


def test_raw_frame_reading_is_used_on_supported_pythons():
    import os
    import sys
    import sysconfig

    header = os.path.join(sysconfig.get_paths()["include"], "internal", "pycore_frame.h")
    supported = (3, 11) <= sys.version_info[:2] <= (3, 13) and not sysconfig.get_config_var("Py_GIL_DISABLED")
    assert _cupti._test_raw_frames() == (supported and os.path.isfile(header))
