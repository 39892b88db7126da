"""The cupti backend's real native code, end to end on CPU: a child process loads the simulated CUPTI and
driver (tests/sim/) through PROTON_CUPTI_LIB_PATH and LD_LIBRARY_PATH, plays kernel launches, graph
captures and replays, drops and full buffers under scopes, and the written profile must show them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import simcuda

from proton_core.testing import child, child_names, load_profile

from cupti_helpers import kernels

STATS = ("records", "delivered", "buffers", "subscribed", "subscribes", "finalizes", "lost_at_finalize", "syncs",
         "dropped", "forced_flushes", "kernel_activity", "incomplete")


def run(cuda_sim, tmp_path, body: str, env: dict | None = None,
        check: bool = True) -> tuple[dict, subprocess.CompletedProcess]:
    """Run ``body`` in a child process against the simulation (``sim``: a simcuda.Sim, ``proton``:
    proton_core, ``OUT``: the profile's name); returns the simulation's counters after it, and the process."""
    script = "\n".join([
        "import json, sys",
        f"sys.path.insert(0, {simcuda.HERE!r})",
        "import simcuda",
        "import proton_core as proton",
        "sim = simcuda.Sim()",
        f"OUT = {str(tmp_path / 'sim')!r}",
        textwrap.dedent(body),
        f"print('SIMSTATS=' + json.dumps({{k: sim.stat(k) for k in {STATS!r}}}))",
    ])
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env=simcuda.environment(cuda_sim, env), timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SIMSTATS=")]
    return (json.loads(lines[-1][len("SIMSTATS="):]) if lines else {}), proc


def test_kernels_under_scopes_with_times_counts_and_devices(cuda_sim, tmp_path):
    stats, proc = run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        with proton.scope("outer"):
            sim.launch("kern_a", device=0, duration_ns=1000, times=3)
            with proton.scope("inner"):
                sim.launch("kern_b", device=1, stream=3, duration_ns=500)
                sim.launch("kern_a", device=1, duration_ns=40)
        sim.launch("kern_c", device=0, duration_ns=250)
        proton.finalize()
    """)
    root, devices = load_profile(str(tmp_path / "sim.hatchet"))
    assert root["metadata"]["backend"] == "cupti"
    outer = child(root, "outer")
    assert kernels(outer)["kern_a"] == {"time (ns)": 3000, "count": 3, "device_id": "0", "device_type": "CUDA"}
    inner = kernels(child(outer, "inner"))
    assert inner["kern_b"]["time (ns)"] == 500 and inner["kern_b"]["device_id"] == "1"
    assert inner["kern_a"] == {"time (ns)": 40, "count": 1, "device_id": "1", "device_type": "CUDA"}
    assert kernels(root)["kern_c"]["count"] == 1 and kernels(root)["kern_c"]["time (ns)"] == 250
    # device info read from the (simulated) driver for each device a kernel ran on
    assert set(devices["CUDA"]) == {"0", "1"}
    assert devices["CUDA"]["1"]["arch"] == "90" and devices["CUDA"]["1"]["num_sms"] == 132
    # every record CUPTI made reached the profile; CUPTI was let go at finalize
    assert stats["records"] == stats["delivered"] == 6
    assert stats["subscribed"] == 0 and stats["finalizes"] == 1 and stats["lost_at_finalize"] == 0
    assert stats["syncs"] >= 1, "finalize must synchronize the contexts before the last flush"
    assert "dropped" not in root["metrics"]


def test_graph_replays_land_under_captured_at(cuda_sim, tmp_path):
    stats, proc = run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        with proton.scope("build"):
            graph = sim.capture(["g_first", "g_second"], device=0)
        with proton.scope("step"):
            for _ in range(4):
                sim.replay(graph, duration_ns=100)
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    captured = kernels(child(root, "step", "<captured_at>", "build"))
    assert captured["g_first"]["count"] == 4 and captured["g_first"]["time (ns)"] == 400
    assert captured["g_second"]["count"] == 4
    assert "g_first" not in kernels(child(root, "step")), "a replayed kernel is filed only under where it was captured"
    assert "build" not in child_names(root), "capturing runs no kernel"
    assert "Cannot find graph" not in proc.stderr


def test_graph_captured_before_start_is_replayed_under_the_replay_scope(cuda_sim, tmp_path):
    stats, proc = run(cuda_sim, tmp_path, """
        graph = sim.capture(["early_kernel"], device=1)
        proton.start(OUT, backend="cupti")
        with proton.scope("step"):
            sim.replay(graph, duration_ns=70)
            sim.replay(graph, duration_ns=70)
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert kernels(child(root, "step"))["early_kernel"] == {"time (ns)": 140, "count": 2, "device_id": "1",
                                                            "device_type": "CUDA"}
    assert "Cannot find graph for graphExecId" in proc.stderr


def test_records_without_buffer_space_are_counted_as_dropped(cuda_sim, tmp_path):
    stats, _ = run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        sim.drop(2)
        with proton.scope("s"):
            sim.launch("k", times=5)
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert kernels(child(root, "s"))["k"]["count"] == 3
    assert root["metrics"]["dropped"] == 2
    assert stats["dropped"] == 2


def test_full_buffers_are_handed_over_whole(cuda_sim, tmp_path):
    # 8 MiB buffers hold ~40 000 kernel records: 90 000 launches fill two and start a third
    stats, _ = run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        with proton.scope("many"):
            sim.launch("tiny", duration_ns=3, times=90000)
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert kernels(child(root, "many"))["tiny"] == {"time (ns)": 270000, "count": 90000, "device_id": "0",
                                                    "device_type": "CUDA"}
    assert stats["buffers"] >= 3 and stats["delivered"] == 90000


def test_launches_while_deactivated_are_left_out(cuda_sim, tmp_path):
    run(cuda_sim, tmp_path, """
        session = proton.start(OUT, backend="cupti")
        sim.launch("seen")
        proton.deactivate(session)
        sim.launch("unseen", times=3)
        proton.activate(session)
        sim.launch("seen")
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert kernels(root)["seen"]["count"] == 2
    assert "unseen" not in kernels(root)


def test_trace_data_keeps_each_kernel_with_its_stream(cuda_sim, tmp_path):
    run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti", data="trace")
        with proton.scope("t"):
            sim.launch("traced", stream=5, duration_ns=2000, times=2)
        proton.finalize()
    """)
    events = json.loads((tmp_path / "sim.chrome_trace").read_text())["traceEvents"]
    traced = [e for e in events if e.get("name") == "traced" and e.get("ph") == "X"]
    assert len(traced) == 2
    assert all(e["dur"] == pytest.approx(2.0) for e in traced)  # microseconds
    assert traced[1]["ts"] >= traced[0]["ts"] + traced[0]["dur"], "kernels of one stream run one after another"


def test_another_cupti_client_is_refused_in_one_line_or_skipped(cuda_sim, tmp_path):
    _, proc = run(cuda_sim, tmp_path, """
        try:
            proton.start(OUT, backend="cupti")
        except proton.ProtonError as exc:
            print("REFUSED", exc)
    """, env={**os.environ, "SIM_CUPTI_TAKEN": "1"})
    assert "REFUSED cupti backend cannot start: another CUPTI client already holds CUPTI" in proc.stdout
    stats, proc = run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        with proton.scope("s"):
            sim.launch("k")
        proton.finalize()
    """, env={**os.environ, "SIM_CUPTI_TAKEN": "1", "PROTON_CUPTI_ON_CONFLICT": "skip"})
    assert "another CUPTI client holds CUPTI" in proc.stderr
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert root["children"] == [], "no kernel recorded, and the scope alone is not written"


def test_a_native_threads_launches_go_under_the_main_threads_scope(cuda_sim, tmp_path):
    # decision 0245: a thread whose context the core never set launches under the main thread's
    run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti")
        with proton.scope("main_scope"):
            sim.launch_on_thread("from_thread", device=1, duration_ns=30, times=4)
        proton.finalize()
    """)
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    assert kernels(child(root, "main_scope"))["from_thread"] == {"time (ns)": 120, "count": 4, "device_id": "1",
                                                                  "device_type": "CUDA"}


def test_periodic_phases_end_at_n_launches_counted_natively(cuda_sim, tmp_path):
    run(cuda_sim, tmp_path, """
        proton.start(OUT, backend="cupti", mode="periodic_flushing:launches=5")
        with proton.scope("s"):
            sim.launch("k", times=12)
        proton.finalize()
    """)
    parts = sorted(tmp_path.glob("sim.part_*.hatchet"))
    counts = [kernels(child(load_profile(str(p))[0], "s"))["k"]["count"] for p in parts]
    assert counts == [5, 5, 2]


def test_reattach_after_a_graph_loses_no_record(cuda_sim, tmp_path):
    # after a graph was captured, a phase end past PROTON_CUPTI_REATTACH_RECORDS records detaches CUPTI
    # (cuptiFinalize) and attaches it again: every record is delivered first
    stats, _ = run(cuda_sim, tmp_path, """
        session = proton.start(OUT, backend="cupti", mode="periodic_flushing")
        with proton.scope("s"):
            graph = sim.capture(["g"])
            sim.launch("k", times=4)
            sim.replay(graph)
            proton.deactivate(session, flushing=True)  # the records reach the recorder: the phase end counts them
            proton.activate(session)
            proton.data.advance_phase(session)
            sim.launch("k", times=3)
            sim.replay(graph)
        proton.finalize()
    """, env={**os.environ, "PROTON_CUPTI_REATTACH_RECORDS": "3"})
    assert stats["subscribes"] == 2 and stats["finalizes"] == 2, stats
    assert stats["lost_at_finalize"] == 0 and stats["records"] == stats["delivered"] == 9
    parts = sorted(tmp_path.glob("sim.part_*.hatchet"))
    first, second = (load_profile(str(p))[0] for p in parts)
    assert kernels(child(first, "s"))["k"]["count"] == 4 and kernels(child(second, "s"))["k"]["count"] == 3
    assert kernels(child(second, "s", "<captured_at>", "s"))["g"]["count"] == 1, "graph nodes survive the re-attach"


def test_pcsampling_without_the_api_is_refused_in_one_line(cuda_sim, tmp_path):
    _, proc = run(cuda_sim, tmp_path, """
        try:
            proton.start(OUT, backend="cupti", mode="pcsampling")
        except proton.ProtonError as exc:
            print("REFUSED", exc)
    """)
    refused = [line for line in proc.stdout.splitlines() if line.startswith("REFUSED")]
    assert refused == [f"REFUSED cupti backend cannot start pcsampling: libcupti at {cuda_sim}/libcupti.so lacks "
                       "the PC Sampling API (cuptiPCSamplingEnable); set PROTON_CUPTI_LIB_PATH to a libcupti from "
                       "CUDA 12.4 or newer"]


def test_finalize_waits_for_kernels_still_running(cuda_sim, tmp_path):
    # kernels keep running until their context is synchronized: finalize must synchronize the launching
    # thread's context and every active primary context before its forced flush, or they come out cut
    # short, without times
    stats, _ = run(cuda_sim, tmp_path, """
        sim.set_async(True)
        proton.start(OUT, backend="cupti")
        with proton.scope("s"):
            sim.launch("on_current", device=0, duration_ns=100, times=3)
            sim.launch("on_other_device", device=1, duration_ns=50, times=2)
        assert sim.stat("running") == 5
        proton.finalize()
    """)
    assert stats["incomplete"] == 0 and stats["records"] == 5, stats
    root, _ = load_profile(str(tmp_path / "sim.hatchet"))
    found = kernels(child(root, "s"))
    assert found["on_current"]["time (ns)"] == 300 and found["on_other_device"]["time (ns)"] == 100
    assert "untimed" not in root["metrics"]


def test_a_phase_is_written_once_its_running_kernels_ended(cuda_sim, tmp_path):
    run(cuda_sim, tmp_path, """
        sim.set_async(True)
        session = proton.start(OUT, backend="cupti", mode="periodic_flushing")
        with proton.scope("s"):
            sim.launch("first", times=3)
            proton.data.advance_phase(session)
            sim.launch("second", times=2)
        proton.finalize()
    """)
    first, second = (load_profile(str(p))[0] for p in sorted(tmp_path.glob("sim.part_*.hatchet")))
    assert kernels(child(first, "s")) == {"first": {"time (ns)": 3000, "count": 3, "device_id": "0",
                                                    "device_type": "CUDA"}}
    assert kernels(child(second, "s"))["second"]["count"] == 2
    assert "dropped" not in first["metrics"] and "dropped" not in second["metrics"]
