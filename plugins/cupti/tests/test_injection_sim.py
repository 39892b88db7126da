"""The injection entry point (libproton_inject.so) on CPU: a CUDA program without Python (tests/sim/
inject_client.c) runs against the simulated driver, whose cuInit loads CUDA_INJECTION64_PATH and calls
InitializeInjection as the real driver does; its NVTX ranges reach the profiler through
InitializeInjectionNvtx2.  The environment is the one ``proton-profile`` gives a command's processes.
Each way the program can end must leave its profile: return from main, exit(), SIGTERM, SIGINT, and
SIGKILL under periodic flushing (the parts written before it)."""

from __future__ import annotations

import glob
import gzip
import json
import os
import signal
import subprocess
import sys
import time

import msgpack
import pytest
import simcuda

from proton_core.testing import child, load_profile

from cupti_helpers import kernels, walk

injected = pytest.importorskip("proton_cupti.injected", reason="proton_cupti has no injection entry point")


@pytest.fixture(scope="module")
def client(cuda_sim):
    """The C program, built against the simulated driver; skipped where the injection library is not built."""
    reason = injected.unavailable_reason()
    if reason is not None:
        pytest.skip(f"the injection entry point cannot run here: {reason}")
    return simcuda.build_client(cuda_sim)


def job_environment(cuda_sim, options: dict) -> dict:
    """What ``proton-profile`` sets for a command without Python: the session's options (``PROTON_FOLLOW``,
    a JSON object) and the cupti plugin's injection variables; the simulation found first.  (The start-up
    hook for Python children is left out: nothing here starts Python; test_a_python_program... runs the CLI.)"""
    env = dict(os.environ, PROTON_FOLLOW=json.dumps(options))
    env.update(injected.environment(options))
    assert env.get("CUDA_INJECTION64_PATH") == injected.library_path()
    return simcuda.environment(cuda_sim, env)


def start(client, cuda_sim, tmp_path, *args, **session):
    """The program, run with ``args`` under a session of ``session``'s options (mode, data, output_format)."""
    options = {"name": str(tmp_path / "inj"), "backend": "cupti", **session}
    return subprocess.Popen([client, *args], env=job_environment(cuda_sim, options), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=60):
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the injected program did not end within {timeout} s\nstdout: {out}\nstderr: {err}")


def signal_after(proc, marker: str, sig) -> None:
    """Send ``sig`` to the program once it printed a line starting with ``marker``."""
    for line in proc.stdout:
        if line.startswith(marker):
            break
    proc.send_signal(sig)


def the_profile(tmp_path, proc) -> dict:
    """The one profile the injected process wrote (``inj.pid<P>.hatchet``, a followed process's name)."""
    files = glob.glob(str(tmp_path / "inj.pid*.hatchet"))
    assert files == [str(tmp_path / f"inj.pid{proc.pid}.hatchet")], files
    root, devices = load_profile(files[0])
    assert root["metadata"]["backend"] == "cupti"
    assert set(devices["CUDA"]) == {"0", "1"}
    return root


def assert_workload(root):
    """inject_client.c's workload: kernels with counts, times and devices; NVTX ranges as scopes; graph
    replays under where the graph was captured."""
    outer = child(root, "outer")
    assert kernels(outer)["k_outer"] == {"time (ns)": 2000, "count": 2, "device_id": "0", "device_type": "CUDA"}
    assert kernels(child(outer, "inner"))["k_inner"] == {"time (ns)": 1500, "count": 3, "device_id": "1",
                                                          "device_type": "CUDA"}
    assert kernels(root)["k_top"]["count"] == 1
    replayed = kernels(child(root, "replay", "<captured_at>", "capture"))
    assert replayed["g_a"] == {"time (ns)": 400, "count": 2, "device_id": "0", "device_type": "CUDA"}
    assert replayed["g_b"]["count"] == 2


@pytest.mark.parametrize("how, status", [("return", 7), ("exit", 3)])
def test_profile_written_at_exit_with_the_programs_status(client, cuda_sim, tmp_path, how, status):
    proc = start(client, cuda_sim, tmp_path, how)
    out, err = finish(proc)
    assert proc.returncode == status, err
    assert "injection 1" in out, "the driver did not call InitializeInjection"
    assert f"profile written to {tmp_path / f'inj.pid{proc.pid}.hatchet'}" in err
    assert_workload(the_profile(tmp_path, proc))


def test_sigterm_while_the_program_keeps_launching(client, cuda_sim, tmp_path):
    # the profile is written on the library's own thread while the main thread goes on launching kernels
    proc = start(client, cuda_sim, tmp_path, "phases")
    signal_after(proc, "PHASE 3", signal.SIGTERM)
    _, err = finish(proc, timeout=30)
    assert proc.returncode == -signal.SIGTERM, err
    root = the_profile(tmp_path, proc)
    assert_workload(root)
    assert kernels(root)["phase_kernel"]["count"] >= 30


@pytest.mark.parametrize("flag", ["on-thread", "nvtx-first"])
def test_cuda_and_nvtx_first_used_elsewhere_than_main(client, cuda_sim, tmp_path, flag):
    # on-thread: cuInit (so the interpreter's start), NVTX ranges and launches on a thread that ends before
    # main returns; nvtx-first: a library's first NVTX range comes before cuInit
    proc = start(client, cuda_sim, tmp_path, "return", flag)
    _, err = finish(proc)
    assert proc.returncode == 7, err
    assert_workload(the_profile(tmp_path, proc))


def test_exit_from_another_thread_and_a_range_left_open(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "thread-exit", "open-range")
    _, err = finish(proc)
    assert proc.returncode == 4, err
    root = the_profile(tmp_path, proc)
    assert_workload(root)
    assert kernels(child(root, "left_open"))["k_open"]["count"] == 1


@pytest.mark.parametrize("variable, value, says", [
    ("PROTON_INJECT_PYTHON_LIB", None, "proton: PROTON_INJECT_PYTHON_LIB is not set"),
    ("PROTON_INJECT_PYTHON_LIB", "/nonexistent/libpython3.so",
     "proton: cannot load Python (/nonexistent/libpython3.so)"),
    ("PROTON_FOLLOW", "{not json", "proton: PROTON_FOLLOW is not a JSON object of session options"),
    ("PROTON_FOLLOW", '{"backend": "nonesuch"}', "runs unprofiled: unknown backend 'nonesuch'"),
], ids=["no-python-lib", "bad-python-lib", "bad-options", "unknown-backend"])
def test_a_misconfigured_injection_says_so_in_one_line_and_the_program_runs(client, cuda_sim, tmp_path, variable,
                                                                             value, says):
    env = job_environment(cuda_sim, {"name": str(tmp_path / "inj"), "backend": "cupti"})
    if value is None:
        env.pop(variable)
    else:
        env[variable] = value
    proc = subprocess.run([client, "exit"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("proton:")]
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not glob.glob(str(tmp_path / "inj*")), "an unprofiled process writes nothing"


def test_a_child_forked_without_exec_is_not_profiled_and_says_so(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "return", "fork")
    _, err = finish(proc)
    assert proc.returncode == 7, err
    root = the_profile(tmp_path, proc)  # the parent's only: the child writes nothing
    assert_workload(root)
    assert "k_child" not in kernels(root)
    assert "forked by the profiled process" in err and "is not profiled" in err


def test_a_child_forked_and_execed_is_profiled_in_its_own_file(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "return", "fork-exec")
    _, err = finish(proc)
    assert proc.returncode == 7, err
    files = glob.glob(str(tmp_path / "inj.pid*.hatchet"))
    assert len(files) == 2, (files, err)  # the parent's and the new program's, each under its own pid
    for path in files:
        assert_workload(load_profile(path)[0])


def test_the_programs_own_sigterm_handler_is_kept(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "own-sigterm")
    signal_after(proc, "READY", signal.SIGTERM)
    _, err = finish(proc, timeout=30)
    assert proc.returncode == 5, f"the program's handler (exit(5)) must run: {err}"
    assert_workload(the_profile(tmp_path, proc))


def test_a_program_that_execs_keeps_what_it_recorded_before(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "exec")  # the workload, then exec of `inject_client return`
    _, err = finish(proc)
    assert proc.returncode == 7, err
    files = sorted(glob.glob(str(tmp_path / "inj.pid*.hatchet")))
    assert len(files) == 2, (files, err)  # before the exec and after it, beside each other
    for path in files:
        assert_workload(load_profile(path)[0])


@pytest.mark.parametrize("session, extension", [({"data": "trace"}, "chrome_trace"),
                                                ({"output_format": "pprof"}, "pb.gz"),
                                                ({"output_format": "hatchet_msgpack"}, "hatchet_msgpack")])
def test_every_output_format_is_written_at_exit(client, cuda_sim, tmp_path, session, extension):
    proc = start(client, cuda_sim, tmp_path, "exit", **session)
    _, err = finish(proc)
    assert proc.returncode == 3, err
    path = tmp_path / f"inj.pid{proc.pid}.{extension}"
    assert path.exists(), err
    if extension == "chrome_trace":
        events = json.loads(path.read_text())["traceEvents"]
        names = [e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
        assert sorted(names) == sorted(["k_outer"] * 2 + ["k_inner"] * 3 + ["k_top"] + ["g_a", "g_b"] * 2)
        inner = [e for e in events if e.get("name") == "k_inner" and e.get("ph") == "X"]
        assert all(e["args"]["path"] == "outer/inner" for e in inner)
    elif extension == "pb.gz":  # its numbers are checked by the pprof sink's own tests and go tool pprof
        data = gzip.decompress(path.read_bytes())
        for name in (b"outer", b"inner", b"k_outer", b"k_inner", b"k_top", b"<captured_at>", b"g_a", b"g_b",
                     b"gpu_kernel_time"):
            assert name in data, name
    else:
        assert_workload(msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)[0])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_profile_written_when_a_signal_ends_the_program(client, cuda_sim, tmp_path, sig):
    proc = start(client, cuda_sim, tmp_path, "sigterm")
    signal_after(proc, "READY", sig)
    out, err = finish(proc, timeout=15)
    assert proc.returncode == -sig, f"the program must die of {sig.name} once its profile is written: {err}"
    assert_workload(the_profile(tmp_path, proc))


def test_sigkill_leaves_the_parts_written_before_it(client, cuda_sim, tmp_path):
    proc = start(client, cuda_sim, tmp_path, "phases", mode="periodic_flushing:interval=0.1:poll=0.05")
    deadline = time.monotonic() + 60
    # the workload comes before the first phase_kernel and parts are written in order: once a part holds a
    # phase_kernel, every part with the workload is on disk
    while time.monotonic() < deadline:
        if any("phase_kernel" in open(f).read() for f in glob.glob(str(tmp_path / "inj.pid*.part_*.hatchet"))):
            break
        time.sleep(0.05)
    proc.kill()
    finish(proc)
    assert proc.returncode == -signal.SIGKILL
    parts = sorted(glob.glob(str(tmp_path / "inj.pid*.part_*.hatchet")))
    assert parts, "no part was written before the kill"
    assert not (tmp_path / f"inj.pid{proc.pid}.hatchet").exists(), "a killed process writes no final profile"
    totals: dict[str, int] = {}
    for part in parts:
        root, _ = load_profile(part)  # each one whole: parts are written to a temporary name, then renamed
        for _, node in [((), root), *walk(root)]:
            for name, metrics in kernels(node).items():
                totals[name] = totals.get(name, 0) + metrics["count"]
    assert {k: totals.get(k) for k in ("k_outer", "k_inner", "k_top", "g_a", "g_b")} == \
        {"k_outer": 2, "k_inner": 3, "k_top": 1, "g_a": 2, "g_b": 2}
    assert totals["phase_kernel"] > 0 and totals["phase_kernel"] % 10 == 0, totals


def test_proton_profile_runs_the_program_and_passes_its_status_through(client, cuda_sim, tmp_path):
    env = simcuda.environment(cuda_sim)
    cmd = [sys.executable, "-m", "proton_core", "-n", str(tmp_path / "inj"), "-b", "cupti", client, "exit"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    files = glob.glob(str(tmp_path / "inj.pid*.hatchet"))
    assert len(files) == 1, (files, proc.stderr)
    root, _ = load_profile(files[0])
    assert_workload(root)


PARENT = """
import subprocess, sys
sys.path.insert(0, {sim_dir!r})
import simcuda
import proton_core as proton

with proton.scope("parent_scope"):
    simcuda.Sim().launch("k_parent", times=2)
print("child status", subprocess.run([{client!r}, "exit"]).returncode)
"""


@pytest.mark.parametrize("no_follow", [False, True], ids=["followed", "no-follow"])
def test_a_python_program_and_the_cuda_program_it_runs_are_profiled_each_in_its_file(client, cuda_sim, tmp_path,
                                                                                        no_follow):
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(sim_dir=simcuda.HERE, client=client))
    cmd = [sys.executable, "-m", "proton_core", "-n", str(tmp_path / "run"), "-b", "cupti",
           *(["--no-follow"] if no_follow else []), str(script)]
    proc = subprocess.run(cmd, env=simcuda.environment(cuda_sim), cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "child status 3" in proc.stdout, proc.stderr
    parent, _ = load_profile(str(tmp_path / "run.hatchet"))
    assert kernels(child(parent, "parent_scope"))["k_parent"]["count"] == 2
    assert "outer" not in [c["frame"]["name"] for c in parent["children"]], "the child's kernels are its own"
    children = glob.glob(str(tmp_path / "run.pid*.hatchet"))
    if no_follow:
        assert children == [], "--no-follow: what the program starts is not profiled"
    else:
        assert len(children) == 1, (children, proc.stderr)
        assert_workload(load_profile(children[0])[0])
