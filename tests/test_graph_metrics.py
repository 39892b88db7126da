"""Metrics given while a CUDA graph is captured count at every replay, under ``<captured_at>`` (decision 0320).

Through the synthetic backend, whose ``capturing()``/``replay()`` tell ``proton_core.graph_metrics`` what
the torch observer tells it on a GPU (tests/test_graph_metrics_gpu.py does it with torch and CUPTI).
"""

import gc
import threading

import pytest

import proton_core as proton
from proton_core import graph_metrics
from proton_core.plugin_api import close_op, metric_name, open_counted_op
from proton_core.testing import child, child_names, find_all, load_profile

CAPTURED = "<captured_at>"


def load(path):
    return load_profile(str(path))[0]


def test_scope_and_op_metrics_count_once_per_replay_under_captured_at(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with fake.backend.capturing() as graph:
        for _ in range(10):
            with proton.scope("scope_a", metrics={"bytes": 16}):
                fake.launch("fill")
            proton.enter_scope("foo_test", triton_op=True, metrics={"bytes": 16, "flops": 4.0})
            fake.launch("foo")
            proton.exit_scope(triton_op=True)
            proton.enter_scope("scope_c")
            proton.exit_scope("scope_c", metrics={"rows (exc)": 2, "dtype (pty)": "f32"})
    with proton.scope("test0"):
        for _ in range(3):
            fake.backend.replay(graph)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    assert child_names(root) == ["test0"]  # nothing at the capture: no kernel ran there, no metric lands there
    captured = child(root, "test0", CAPTURED)
    scope_a = child(captured, "scope_a")["metrics"]
    assert scope_a == {"bytes": 3 * 160}  # no count: the kernel is its child
    foo = child(captured, "foo_test")["metrics"]
    assert (foo["bytes"], foo["flops"], foo["count"]) == (3 * 160, 3 * 40.0, 30)
    scope_c = child(captured, "scope_c")["metrics"]
    assert scope_c["rows (exc)"] == 3 * 20 and scope_c["dtype (pty)"] == "f32"


def test_tensor_metrics_are_read_once_and_counted_per_replay(tmp_path, fake):
    torch = pytest.importorskip("torch")
    proton.start(str(tmp_path / "p"), backend="fake")
    a = torch.ones((2, 2))
    with fake.backend.capturing() as graph:
        for _ in range(10):
            with proton.scope("scope_b", metrics={"sum": a.sum()}):
                fake.launch("ones")
            with proton.scope("scope_d", metrics={"vec": torch.arange(4)}):
                fake.launch("mul")
    with proton.scope("test0"):
        fake.backend.replay(graph)
        fake.backend.replay(graph)
    proton.finalize()
    captured = child(load(tmp_path / "p.hatchet"), "test0", CAPTURED)
    assert child(captured, "scope_b")["metrics"]["sum"] == 2 * 40.0
    assert child(captured, "scope_d")["metrics"]["vec"] == [0, 20, 40, 60]


def test_a_tensor_that_cannot_be_read_is_left_out_with_one_warning(tmp_path, fake, caplog):
    class Broken:
        shape, dtype = (), "float32"

        def item(self):
            raise RuntimeError("device lost\nmore")

    proton.start(str(tmp_path / "p"), backend="fake")
    with fake.backend.capturing() as graph:
        with proton.scope("s", metrics={"bad": Broken(), "good": 1}):
            fake.launch("k")
    for _ in range(2):
        fake.backend.replay(graph)
    proton.finalize()
    metrics = child(load(tmp_path / "p.hatchet"), CAPTURED, "s")["metrics"]
    assert metrics == {"good": 2}
    said = [r.getMessage() for r in caplog.records if "device lost" in r.getMessage()]
    assert len(said) == 1 and "CUDA graph" in said[0]


def test_sessions_get_what_they_recorded_at_capture_and_record_at_replay(tmp_path, fake):
    """Upstream's test_multiple_sessions_cudagraph_metric_kernels and test_tensor_metrics_cudagraph_deactivate."""
    s0 = proton.start(str(tmp_path / "s0"), backend="fake")
    s1 = proton.start(str(tmp_path / "s1"), backend="fake")
    proton.deactivate(s1)
    with fake.backend.capturing() as foo:
        for _ in range(3):
            proton.enter_scope("foo_with_metric", triton_op=True, metrics={"sum_metric": 4.0})
            fake.launch("foo")
            proton.exit_scope(triton_op=True)
        proton.deactivate(s0)
        with proton.scope("scope_b", metrics={"sum": 4}):  # nobody records: given to nobody
            fake.launch("ones")
        proton.activate(s0)
    with proton.scope("session0_replay"):
        fake.backend.replay(foo)
    proton.deactivate(s0)
    proton.activate(s1)
    with proton.scope("session1_replay"):
        fake.backend.replay(foo)  # s1 was not recording when foo was captured: its kernels, no metrics
    proton.finalize(s0)
    proton.finalize(s1)
    first = child(load(tmp_path / "s0.hatchet"), "session0_replay", CAPTURED)
    assert child(first, "foo_with_metric")["metrics"]["sum_metric"] == 12.0
    assert child(first, "foo_with_metric")["metrics"]["count"] == 3
    assert not find_all(first, lambda name: name == "scope_b")
    second = child(load(tmp_path / "s1.hatchet"), "session1_replay", CAPTURED, "foo_with_metric")["metrics"]
    assert "sum_metric" not in second and second["count"] == 3


def test_periodic_phases_each_hold_the_replays_of_their_phase(tmp_path, fake):
    """Upstream's test_periodic_flushing_cudagraph, smaller."""
    torch = pytest.importorskip("torch")
    sid = proton.start(str(tmp_path / "p"), backend="fake", mode="periodic_flushing:poll=100")
    with fake.backend.capturing() as graph:
        with proton.scope("scope_a", metrics={"bytes": 16}):
            fake.launch("fill")
        proton.enter_scope("foo_test", triton_op=True, metrics={"bytes": 16, "flops": torch.tensor(4.0)})
        fake.launch("foo")
        proton.exit_scope(triton_op=True)
    with proton.scope("test0"):
        for i in range(50):
            if i and i % 10 == 0:
                proton.data.advance_phase(session=sid)
            fake.backend.replay(graph)
    paths = proton.finalize()
    parts = [p for p in paths if ".part_" in p]
    assert len(parts) == 5
    for part in parts:
        captured = child(load(part), "test0", CAPTURED)
        assert child(captured, "scope_a")["metrics"]["bytes"] == 160
        foo = child(captured, "foo_test")["metrics"]
        assert (foo["bytes"], foo["flops"], foo["count"]) == (160, 40.0, 10)


def test_cached_launch_steps_never_count_at_the_capture(tmp_path, fake):
    numbers = ((metric_name("flops"), 3),)
    proton.start(str(tmp_path / "p"), backend="fake")

    def launch():  # what the Triton hook does: the cached step, else the building one, else the general way
        if not (open_counted_op("meta") or open_counted_op("meta", "op", numbers)):
            proton.enter_scope("op", triton_op=True)
            proton.plugin_api.add_numbers_here(numbers)
        fake.launch("k")
        close_op()

    launch()
    launch()  # cached now
    with fake.backend.capturing() as graph:
        for _ in range(4):
            launch()
    fake.backend.replay(graph)
    launch()  # cached again after the capture
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    assert child(root, "op")["metrics"]["flops"] == 3 * 3
    assert child(root, CAPTURED, "op")["metrics"]["flops"] == 4 * 3


def test_other_threads_and_host_time_are_not_captured(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with fake.backend.capturing() as graph:
        worker = threading.Thread(target=lambda: proton.scope("worker", metrics={"n": 1}).__enter__())
        worker.start()
        worker.join()
        with proton.cpu_timed_scope("timed", metrics={"n": 2}):
            fake.launch("k")
    fake.backend.replay(graph)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    assert child(root, "worker")["metrics"]["n"] == 1  # not this thread's capture: filed at once
    assert "cpu_time (ns)" in child(root, "timed")["metrics"]  # host time is the capture's own
    assert "n" not in child(root, "timed")["metrics"]
    assert child(root, CAPTURED, "timed")["metrics"]["n"] == 2


def test_python_context_files_them_beside_the_replayed_kernels(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake", context="python")
    with fake.backend.capturing() as graph:
        with proton.scope("s", metrics={"bytes": 8}): fake.launch("k")  # noqa: E701  (one line: one frame)
    fake.backend.replay(graph)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    (kernel_path, _), = find_all(root, lambda name: name == "k")
    (metric_path, node), = [(p, n) for p, n in find_all(root, lambda name: True) if "bytes" in n["metrics"]]
    assert CAPTURED in kernel_path and metric_path == kernel_path[:-1]
    assert node["metrics"]["bytes"] == 8


def test_a_graph_captured_again_forgets_the_old_metrics_and_a_dead_graph_is_forgotten(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with fake.backend.capturing() as graph:
        with proton.scope("s", metrics={"old": 1}):
            fake.launch("k")
    fake.backend.begin_capture()
    graph_metrics.capture_abandoned(fake.backend.end_capture())  # ended twice: the second end finds nothing
    graph_metrics.capture_began(graph)  # the same graph captured again
    with proton.scope("s", metrics={"new": 1}):
        pass
    graph_metrics.capture_ended(graph)
    fake.backend.replay(graph)
    proton.finalize()
    assert child(load(tmp_path / "p.hatchet"), CAPTURED, "s")["metrics"] == {"new": 1}
    assert id(graph) in graph_metrics._GRAPHS
    del graph
    gc.collect()
    assert not graph_metrics._GRAPHS and not graph_metrics.CAPTURE.on


def test_a_graph_replayed_while_another_is_captured_hands_its_metrics_to_that_capture(tmp_path, fake):
    proton.start(str(tmp_path / "p"), backend="fake")
    with fake.backend.capturing() as inner:
        with proton.scope("s", metrics={"n": 1}):
            fake.launch("k")
    with fake.backend.capturing() as outer:
        with proton.scope("o"):
            fake.backend.replay(inner)
    with proton.scope("run"):
        fake.backend.replay(outer)
        fake.backend.replay(outer)
    proton.finalize()
    root = load(tmp_path / "p.hatchet")
    assert child(root, "run", CAPTURED, "o", CAPTURED, "s")["metrics"]["n"] == 2


def test_outside_captures_nothing_is_diverted(tmp_path, fake, monkeypatch):
    def refuse(*args):
        raise AssertionError("divert called outside a capture")

    monkeypatch.setattr(graph_metrics, "divert", refuse)
    proton.start(str(tmp_path / "p"), backend="fake")
    with proton.scope("s", metrics={"n": 1}):
        proton.plugin_api.add_numbers_here(((metric_name("m"), 2),))
        fake.launch("k")
    proton.finalize()
    assert child(load(tmp_path / "p.hatchet"), "s")["metrics"]["n"] == 1
