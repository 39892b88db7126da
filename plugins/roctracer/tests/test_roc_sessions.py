"""Sessions on the AMD backend against the simulated ROCm: everything short of the silicon.

Each test plays a script through the simulator (dispatches from several threads, GPUs and queues,
records delivered out of order, some dropped) and reads the profile the core wrote.
"""

import json
import threading
import time

import pytest

import proton_core as proton
from proton_core.plugin_api import ProtonError
from proton_core.testing import child, child_names, find_all, load_profile


def kernels(node):
    """{kernel name: metrics} of a node's kernel children."""
    return {c["frame"]["name"]: c["metrics"] for c in node["children"] if "device_id" in c["metrics"]}


def profile(tmp_path, name="p"):
    return load_profile(str(tmp_path / f"{name}.hatchet"))


def test_exact_counts_and_times_per_context_and_device(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("a"):
        for _ in range(3):
            sim.dispatch("gemm", gpu=0, duration_ns=1000)
        sim.dispatch("gemm", gpu=1, duration_ns=70)
        with proton.scope("b"):
            sim.dispatch("relu", gpu=0, queue=2, duration_ns=5)
    sim.dispatch("relu", gpu=0, duration_ns=11)
    proton.finalize()
    root, devices = profile(tmp_path)
    a = child(root, "a")
    gemm = [c["metrics"] for c in a["children"] if c["frame"]["name"] == "gemm"]
    assert sorted((m["device_id"], m["count"], m["time (ns)"]) for m in gemm) == [("0", 3, 3000), ("1", 1, 70)]
    assert kernels(child(a, "b"))["relu"]["time (ns)"] == 5
    assert kernels(root)["relu"]["count"] == 1 and kernels(root)["relu"]["time (ns)"] == 11
    assert all(m["device_type"] == "HIP" for m in gemm)
    # device info as upstream writes it for HIP, for the viewer's utilisation metrics
    assert devices["HIP"]["0"] == {"arch": "gfx942", "num_sms": 304, "clock_rate": 2100000,
                                   "memory_clock_rate": 1300000, "bus_width": 8192}
    assert set(devices["HIP"]) == {"0", "1"}


def test_threads_keep_their_own_contexts(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    barrier = threading.Barrier(4)

    def worker(i):
        with proton.scope(f"thread{i}"):
            barrier.wait()
            for _ in range(50):
                sim.dispatch(f"k{i % 2}", gpu=i % 2, queue=i, duration_ns=i + 1)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root, _ = profile(tmp_path)
    for i in range(4):
        m = kernels(child(root, f"thread{i}"))[f"k{i % 2}"]
        assert (m["count"], m["time (ns)"], m["device_id"]) == (50, 50 * (i + 1), str(i % 2))


def test_a_thread_without_scopes_dispatches_under_the_main_threads_scope(script, tmp_path):
    """Decision 0245, as with CUPTI: a worker that never opened a scope (autograd's backward thread) files its
    kernels under the scope the main thread is in."""
    sim = script
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("backward"):
        t = threading.Thread(target=sim.dispatch, args=("grad",), kwargs={"gpu": 0, "duration_ns": 9})
        t.start()
        t.join()
    proton.finalize()
    root, _ = profile(tmp_path)
    assert kernels(child(root, "backward"))["grad"]["count"] == 1 and "grad" not in kernels(root)


def test_out_of_order_records_are_placed_by_their_launch(script, tmp_path):
    sim = script
    sim.script(seed=12345, per_callback=7)  # shuffled, delivered 7 records per callback
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    for i in range(40):
        with proton.scope(f"step{i}"):
            sim.dispatch("k", gpu=0, queue=1, duration_ns=100 + i)  # one queue: still out of order
    proton.finalize()
    root, _ = profile(tmp_path)
    for i in range(40):
        assert kernels(child(root, f"step{i}"))["k"]["time (ns)"] == 100 + i


def test_records_the_sdk_dropped_are_counted(script, tmp_path):
    sim = script
    sim.script(seed=7, drop_every=4)
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("s"):
        for _ in range(40):
            sim.dispatch("k", duration_ns=10)
    proton.finalize()
    root, _ = profile(tmp_path)
    assert kernels(child(root, "s"))["k"]["count"] == 30
    text = open(tmp_path / "p.hatchet").read()
    assert root["metrics"].get("dropped") == 10, (root["metrics"], text[:300])


def test_launches_before_start_and_after_finalize_are_not_counted(script, tmp_path):
    sim = script
    sim.dispatch("early", duration_ns=1)
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    sim.dispatch("k", duration_ns=2)
    proton.finalize()
    sim.dispatch("late", duration_ns=3)
    proton.start(str(tmp_path / "q"), backend="rocprofiler")  # the SDK's context kept running: works again
    sim.dispatch("k2", duration_ns=4)
    proton.finalize()
    p, _ = profile(tmp_path, "p")
    q, _ = profile(tmp_path, "q")
    assert set(kernels(p)) == {"k"} and set(kernels(q)) == {"k2"}
    assert "dropped" not in q["metrics"] or q["metrics"]["dropped"] == 0


def test_deactivate_pauses_without_stopping(script, tmp_path):
    sim = script
    sid = proton.start(str(tmp_path / "p"), backend="rocprofiler")
    sim.dispatch("k", duration_ns=1)
    proton.deactivate(sid)
    sim.dispatch("k", duration_ns=1)
    proton.activate(sid)
    sim.dispatch("k", duration_ns=1)
    proton.finalize()
    root, _ = profile(tmp_path)
    assert kernels(root)["k"]["count"] == 2


def test_python_context_walks_the_launching_frames(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "p"), backend="rocprofiler", context="python")

    def model_forward():
        sim.dispatch("k", duration_ns=9)

    model_forward()
    proton.finalize()
    root, _ = profile(tmp_path)
    hits = find_all(root, lambda name: name.endswith("@model_forward"))
    assert len(hits) == 1, child_names(root)
    path, node = hits[0]
    below = find_all(node, lambda name: name == "k")  # under the helper's frame that called the simulator
    assert [n["metrics"]["time (ns)"] for _, n in below] == [9]
    assert below[0][0][0].endswith("@dispatch")
    assert not any("proton_roctracer" in p for p in path), path  # the plugin's own frames are hidden


def test_trace_events_in_the_monotonic_clock(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "t"), backend="rocprofiler", data="trace")
    with proton.scope("s"):
        time.sleep(0.002)
        sim.dispatch("k", gpu=1, queue=9, duration_ns=2000, delay_ns=1000)
        time.sleep(0.002)
    proton.finalize()
    trace = json.load(open(tmp_path / "t.chrome_trace"))
    spans = {e["name"]: e for e in trace["traceEvents"] if e.get("ph") == "X"}
    kernel, scope = spans["k"], spans["s"]
    assert kernel["dur"] == pytest.approx(2.0)  # µs
    # The simulated SDK's clock runs 500 s ahead of CLOCK_MONOTONIC: converted, the kernel starts
    # 1 µs after its dispatch, inside the scope that launched it.
    assert scope["ts"] + 1.0 <= kernel["ts"] <= scope["ts"] + scope["dur"] + 1.0


def test_roctx_ranges_are_scopes(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    with proton.scope("outer"):
        sim.push("forward")
        sim.dispatch("k", duration_ns=3)
        sim.push("layer0")
        sim.dispatch("k", duration_ns=4)
        sim.pop()
        sim.pop()
    proton.finalize()
    root, _ = profile(tmp_path)
    forward = child(root, "outer", "forward")
    assert kernels(forward)["k"]["time (ns)"] == 3
    assert kernels(child(forward, "layer0"))["k"]["time (ns)"] == 4


def test_roctracer_is_the_same_backend(script, tmp_path):
    sim = script
    proton.start(str(tmp_path / "p"), backend="roctracer")
    sim.dispatch("k", duration_ns=5)
    with pytest.raises(ProtonError, match="running backend 'roctracer' under another name"):
        proton.start(str(tmp_path / "q"), backend="rocprofiler")
    proton.finalize()
    root, _ = profile(tmp_path)
    assert kernels(root)["k"]["time (ns)"] == 5


def test_visible_devices_name_hip_ordinals(script, tmp_path, monkeypatch):
    sim = script
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "1,2,3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "2,0")  # physical 3 is cuda:0, physical 1 is cuda:1
    proton.start(str(tmp_path / "p"), backend="rocprofiler")
    sim.dispatch("on3", gpu=3, duration_ns=1)
    sim.dispatch("on1", gpu=1, duration_ns=1)
    proton.finalize()
    root, devices = profile(tmp_path)
    assert kernels(root)["on3"]["device_id"] == "0" and kernels(root)["on1"]["device_id"] == "1"
    assert set(devices["HIP"]) == {"0", "1"}
