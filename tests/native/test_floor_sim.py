"""The bare-CUPTI floor (benchmarks/floor/floor.cpp), both builds, on CPU against the simulated CUDA driver
and CUPTI of the cupti plugin's tests (plugins/cupti/tests/sim/): the Python module keeps its behaviour,
and the injection library, loaded by a C program through CUDA_INJECTION64_PATH, writes what it saw at exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import native_prog

# inject_client.c's workload: every kernel record it makes, by name (graph nodes once per replay)
CLIENT_KERNELS = {"k_outer": 2, "k_inner": 3, "k_top": 1, "g_a": 2, "g_b": 2}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """(folder with the simulated libcuda.so.1 and libcupti.so, the C client built against it)."""
    simcuda = native_prog.simcuda()
    folder = str(tmp_path_factory.mktemp("floor_sim"))
    try:
        simcuda.build(folder)
        return folder, simcuda.build_client(folder)
    except (simcuda.NoCompiler, simcuda.NoHeaders) as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def floor_injection(tmp_path_factory):
    from benchmarks.floor.build import BuildError, build_injection

    try:
        return build_injection(str(tmp_path_factory.mktemp("floor_inject")))
    except BuildError as exc:
        pytest.skip(f"the floor injection does not build here: {str(exc).splitlines()[0]}")


def sim_env(folder: str) -> dict:
    env = native_prog.simcuda().environment(folder)
    for var in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "PROTON_FOLLOW"):
        env.pop(var, None)
    return env


@pytest.mark.parametrize("how, status", [("return", 7), ("exit", 3)])
def test_injection_counts_every_kernel_by_name_and_writes_at_exit(sim, floor_injection, tmp_path, how, status):
    from benchmarks.floor.build import injection_environment

    folder, client = sim
    out = tmp_path / "floor.json"
    env = injection_environment(floor_injection, str(out), sim_env(folder), cupti=os.path.join(folder, "libcupti.so"))
    proc = subprocess.run([client, how], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == status, proc.stderr
    assert "injection 1" in proc.stdout, "the simulated driver loaded no injection library"
    result = json.loads(out.read_text())
    assert result["error"] is None
    assert result["per_kernel"] == CLIENT_KERNELS
    assert result["kernels"] == sum(CLIENT_KERNELS.values()) and result["dropped"] == 0
    assert result["time_ns"] == 2 * 1000 + 3 * 500 + 100 + 4 * 200
    assert result["launches"] >= 8, "six kernel launches and two graph launches reach the launch callback"
    assert result["libcupti"] == os.path.join(folder, "libcupti.so")


def test_injection_without_cupti_says_why_in_its_output(sim, floor_injection, tmp_path):
    from benchmarks.floor.build import injection_environment

    folder, client = sim
    out = tmp_path / "floor.json"
    env = injection_environment(floor_injection, str(out), sim_env(folder), cupti=str(tmp_path / "no_libcupti.so"))
    proc = subprocess.run([client, "return"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7
    result = json.loads(out.read_text())
    assert "no_libcupti.so" in result["error"] and result["kernels"] == 0
    assert "floor: dlopen(" in proc.stderr


def test_module_build_keeps_its_behaviour(sim, tmp_path):
    """start/stop/launches/library of the Python module, as the benchmarks and probes use them."""
    from benchmarks.floor.build import BuildError, build

    folder, _ = sim
    try:
        build(str(tmp_path / "floor"))
    except BuildError as exc:
        pytest.skip(f"the floor module does not build here: {str(exc).splitlines()[0]}")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {native_prog.SIM_DIR!r})
        import simcuda
        from benchmarks.floor.build import load
        floor = load({str(tmp_path / "floor")!r})
        sim = simcuda.Sim()
        lib = {os.path.join(folder, "libcupti.so")!r}
        try:
            floor.stop()
        except RuntimeError as exc:
            print("stop before start:", exc)
        floor.start(lib)
        try:
            floor.start(lib)
        except RuntimeError as exc:
            print("second start:", exc)
        sim.launch("a", duration_ns=100, times=3)
        graph = sim.capture(["g"])
        sim.replay(graph, duration_ns=50)
        print("launches", *floor.launches())
        print("stop", *floor.stop())
        print("library", floor.library() == lib)
        floor.start(lib, 4)  # no correlation map: callbacks counted, nothing kept
        sim.launch("b", duration_ns=7, times=2)
        print("launches", *floor.launches())
        print("stop", *floor.stop(True))
    """)
    proc = subprocess.run([sys.executable, "-c", script], env=sim_env(folder), capture_output=True, text=True,
                          timeout=120, cwd=native_prog.REPO)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "stop before start: floor not started"
    assert lines[1] == "second start: floor already started"
    seen, distinct = map(int, lines[2].split()[1:])
    assert seen == distinct >= 4  # three launches, one graph launch (and the captured launch, if called back)
    assert lines[3] == "stop 4 350 0" and lines[4] == "library True"
    assert lines[5] == "launches 2 0"
    assert lines[6] == "stop 2 14 0"
