"""Slices inside one kernel launch (``Batch.kernel_slices``): routed by epoch to tracing sessions and
written by the Chrome/Perfetto trace as one process per launch with one thread per track."""

import json
import logging

import proton_core as proton
from proton_core.model import Profile, Trace
from proton_core.model.trace import KernelSlice
from proton_core.session import MANAGER
from proton_core.sinks.chrome_trace import trace_events

SLICES = [("CTA 0 (SM 3) warp 0", "outer", 0, 800), ("CTA 0 (SM 3) warp 0", "inner", 100, 300),
          ("CTA 0 (SM 3) warp 1", "outer", 10, 810)]


def test_slices_reach_trace_sessions_as_tracks_per_launch(tmp_path, fake):
    proton.start(str(tmp_path / "t"), backend="fake", data="trace")
    with proton.scope("step"):
        fake.launch("kern", 1000, slices=SLICES)
        fake.launch("kern", 1000, slices=SLICES[:1])
    proton.finalize()
    events = json.loads((tmp_path / "t.chrome_trace").read_text())["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    launches = {pid: name for pid, name in procs.items() if " launch " in name}
    assert sorted(launches.values()) == ["kern launch 1 (CUDA 0)", "kern launch 2 (CUDA 0)"]
    assert not set(launches) & {0, 1}  # the host and the device keep their processes
    first = next(pid for pid, name in launches.items() if name.startswith("kern launch 1"))
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == first}
    assert threads == {1: "CTA 0 (SM 3) warp 0", 2: "CTA 0 (SM 3) warp 1"}
    mine = [e for e in events if e.get("cat") == "in_kernel" and e["pid"] == first]
    assert [(e["name"], e["tid"], e["dur"]) for e in mine] == [("outer", 1, 0.8), ("inner", 1, 0.2), ("outer", 2, 0.8)]
    assert abs(mine[1]["ts"] - mine[0]["ts"] - 0.1) < 1e-6 and mine[0]["args"] == {"kernel": "kern", "path": "step"}
    kernel = next(e for e in events if e.get("cat") == "kernel")
    assert mine[0]["ts"] == kernel["ts"]  # the synthetic backend places slices at the kernel's start


def test_tree_sessions_ignore_slices_and_retired_epochs_count_as_dropped(tmp_path, fake, caplog):
    tree = proton.start(str(tmp_path / "tree"), backend="fake")
    fake.launch("kern", 1000, slices=SLICES)
    proton.finalize(tree)
    assert json.loads((tmp_path / "tree.hatchet").read_text())[0]["metrics"].get("dropped", 0) == 0

    sid = proton.start(str(tmp_path / "t"), backend="fake", data="trace")
    state = MANAGER.backends["fake"]
    fake.launch("kern", 1000)
    proton.data.get(sid, 0)
    proton.deactivate(sid)
    proton.activate(sid)
    proton.data.get(sid, 0)  # retires the first epochs
    fake.backend.kernel_slices.append((1, 1, "kern", 0, 99, "late track", "late", 0, 1))
    with caplog.at_level(logging.WARNING, logger="proton"):
        MANAGER.flush(state)
    assert any("in-kernel metric entries after the flush" in r.getMessage() for r in caplog.records)
    assert MANAGER.sessions[sid].profile.dropped == 1
    proton.finalize()


def test_profile_merge_keeps_slices_of_every_phase():
    a, b = (Profile("p", "shadow", "trace", trace=Trace()) for _ in range(2))
    a.trace.kernel_slices.append(KernelSlice(("s",), "k", "CUDA", 0, 1, "t", "x", 0, 5))
    b.trace.kernel_slices.append(KernelSlice(("s",), "k", "CUDA", 0, 2, "t", "x", 10, 15))
    a.merge(b)
    assert [s.launch_id for s in a.trace.kernel_slices] == [1, 2]
    names = [e["args"]["name"] for e in trace_events(a) if e["name"] == "process_name"]
    assert names[1:] == ["k launch 1 (CUDA 0)", "k launch 2 (CUDA 0)"]
