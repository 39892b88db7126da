"""Issue 43 on the GPU: a CUDA C++ program without Python (prog.cu, built here with nvcc) profiled by
``proton-profile ./prog``, kernel by kernel against the program's own counts and the bare-CUPTI floor's
(benchmarks/floor, as an injection library); a Python program that runs it through ``subprocess``, both
profiled; every exit; periodic parts and every output format; ``--no-follow``.

On the GPU machine: ``python3 -m pytest -m gpu -v tests/native`` (scripts/gpu_check.sh runs it with the rest).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import native_prog
from proton_core.testing import child, child_names, load_profile

pytestmark = pytest.mark.gpu

#: Variables of the machine running the tests that would change what a profiled job does.
FOREIGN = ("PROTON_FOLLOW", "PROTON_BACKEND", "PROTON_RUN_ID", "PROTON_RANKS", "PROTON_SCHEDULE", "PROTON_ON_DEMAND",
           "PROTON_DISABLE", "TRITON_PROTON_DISABLE", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
           "RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MPI_LOCALRANKID")
LAUNCHER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "MV2_", "TORCHELASTIC_", "PROTON_INJECT_")
ARGS = ("--iters", "20", "--replays", "7")


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in FOREIGN and not k.startswith(LAUNCHER_PREFIXES)}


def profile(tmp_path, *args, timeout=300) -> subprocess.CompletedProcess:
    """``proton-profile ARGS`` in ``tmp_path`` (as ``python -m proton_core``: the same command)."""
    return subprocess.run([sys.executable, "-m", "proton_core", *map(str, args)], cwd=tmp_path, env=clean_env(),
                          capture_output=True, text=True, timeout=timeout)


def no_complaint(stderr: str) -> None:
    assert "Traceback" not in stderr and "unprofiled" not in stderr and "not profiled" not in stderr, stderr


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    reason = native_prog.missing_reason()
    if reason:
        pytest.skip(reason)
    return native_prog.build(str(tmp_path_factory.mktemp("prog")))


@pytest.fixture(scope="module")
def floor_library(tmp_path_factory):
    from benchmarks.floor.build import build_injection

    return build_injection(str(tmp_path_factory.mktemp("floor")))


def run_under_floor(prog, floor_library, tmp_path, *args) -> tuple[dict, dict]:
    """(the program's report, the floor's) for ``prog ARGS`` with the floor as its injection library."""
    from benchmarks.floor.build import injection_environment

    out = tmp_path / "floor.json"
    env = injection_environment(floor_library, str(out), clean_env())
    proc = subprocess.run([prog, *args], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    floor = json.loads(out.read_text())
    assert floor["error"] is None, floor["error"]
    return native_prog.report(proc.stdout), floor


def the_file(tmp_path, pid: int, extension: str = "hatchet") -> str:
    files = native_prog.process_files(str(tmp_path / "run"), pid, extension)
    assert files == [str(tmp_path / f"run.pid{pid}.{extension}")], (files, sorted(os.listdir(tmp_path)))
    return files[0]


def np_counts(literal) -> dict:
    return {k: v for k, v in native_prog.kernel_counts(literal).items() if k.startswith("np_")}


def kernels(literal) -> dict:
    return {c["frame"]["name"]: c["metrics"] for c in literal["children"] if "device_id" in c["metrics"]}


# ---------------------------------------------------------------- (a) the program, the floor ----
def test_counts_equal_the_programs_own_and_the_floors(prog, floor_library, tmp_path):
    result = profile(tmp_path, "-n", "run", prog, *ARGS)
    assert result.returncode == 0, result.stderr
    no_complaint(result.stderr)
    own = native_prog.report(result.stdout)
    root, devices = load_profile(the_file(tmp_path, own["pid"]))
    expected = native_prog.launched(own)
    assert np_counts(root) == expected

    floor_own, floor = run_under_floor(prog, floor_library, tmp_path, *ARGS)
    assert floor_own["kernels"] == own["kernels"]
    assert {k: v for k, v in floor["per_kernel"].items() if k.startswith("np_")} == expected
    assert floor["dropped"] == 0 and floor["kernels"] == sum(floor["per_kernel"].values())
    assert "dropped" not in root["metrics"]

    # NVTX ranges are scopes with the kernels under them; the default-stream kernel sits at the top
    step = child(root, "step")
    assert kernels(step)["np_fill"]["count"] == 20
    math = kernels(child(step, "math"))
    assert math["np_scale"]["count"] == 20 and math["np_add"]["count"] == 20
    assert kernels(root)["np_top"]["count"] == 1
    # graph replays under <captured_at>, at the path where the graph was captured
    captured = kernels(child(root, "replay", "<captured_at>", "capture"))
    assert captured["np_graph_a"]["count"] == 7 and captured["np_graph_b"]["count"] == 7
    assert "capture" not in child_names(root) or not kernels(child(root, "capture")), "capturing runs no kernel"
    # times and the device
    assert all(m["time (ns)"] > 0 and m["device_id"] == "0" and m["device_type"] == "CUDA"
               for m in [*math.values(), *captured.values()])
    assert "0" in devices["CUDA"] and int(devices["CUDA"]["0"]["num_sms"]) > 0


# ---------------------------------------------------------------- (b) a Python parent ----
PARENT = """
import os, subprocess, sys
import torch
import proton_core as proton

print("PARENT", os.getpid(), flush=True)
with proton.scope("parent"):
    x = torch.ones(4096, device="cuda")
    for _ in range(6):
        x.mul_(2.0)
    torch.cuda.synchronize()
done = subprocess.run([{prog!r}, "--iters", "4", "--replays", "3"], capture_output=True, text=True)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""


def parent_script(tmp_path, prog) -> str:
    pytest.importorskip("torch")
    path = tmp_path / "parent.py"
    path.write_text(textwrap.dedent(PARENT.format(prog=prog)))
    return str(path)


def parent_pid(stdout: str) -> int:
    return int(next(line.split()[1] for line in stdout.splitlines() if line.startswith("PARENT ")))


def test_a_python_program_and_the_cuda_program_it_runs_each_write_their_own(prog, tmp_path):
    script = parent_script(tmp_path, prog)
    result = profile(tmp_path, "-n", "run", sys.executable, script)
    assert result.returncode == 0, result.stderr
    no_complaint(result.stderr)
    own, parent = native_prog.report(result.stdout), parent_pid(result.stdout)
    files = sorted(f for f in os.listdir(tmp_path) if f.startswith("run.") and f.endswith(".hatchet"))
    assert files == sorted([f"run.pid{parent}.hatchet", f"run.pid{own['pid']}.hatchet"])

    parent_root, _ = load_profile(str(tmp_path / f"run.pid{parent}.hatchet"))
    torch_kernels = native_prog.kernel_counts(child(parent_root, "parent"))
    assert sum(torch_kernels.values()) >= 7, torch_kernels  # ones + 6 x mul_
    assert not np_counts(parent_root), "the program's kernels are in its own file, not its parent's"

    child_root, _ = load_profile(str(tmp_path / f"run.pid{own['pid']}.hatchet"))
    assert np_counts(child_root) == native_prog.launched(own)
    assert not set(torch_kernels) & set(native_prog.kernel_counts(child_root)), "the parent's kernels stay in its file"
    assert "parent" not in child_names(child_root)


# ---------------------------------------------------------------- (c) every exit ----
@pytest.mark.parametrize("how, status", [("exit:3", 3), ("sigterm", 128 + signal.SIGTERM),
                                         ("sigint", 128 + signal.SIGINT)])
def test_the_profile_is_written_however_the_program_ends(prog, tmp_path, how, status):
    result = profile(tmp_path, "-n", "run", prog, *ARGS, "--exit", how)
    assert result.returncode == status, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    own = native_prog.report(result.stdout)
    root, _ = load_profile(the_file(tmp_path, own["pid"]))
    assert np_counts(root) == native_prog.launched(own)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_program_killed_from_outside_still_writes_and_dies_of_the_signal(prog, tmp_path, sig):
    cmd = [sys.executable, "-m", "proton_core", "-n", "run", prog, *ARGS, "--exit", "wait"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = ""
        while not line.startswith("{"):  # the report: printed once the work is done
            line = proc.stdout.readline()
            assert line, "the program ended before its report"
        own = json.loads(line)
        os.kill(own["pid"], sig)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, (proc.returncode, stderr)
    root, _ = load_profile(the_file(tmp_path, own["pid"]))
    assert np_counts(root) == native_prog.launched(own)


# ---------------------------------------------------------------- (d) parts and formats ----
def test_periodic_flushing_writes_parts_that_add_up_to_the_run(prog, tmp_path):
    result = profile(tmp_path, "-n", "run", "-m", "periodic_flushing:launches=15:poll=0.2", prog, *ARGS)
    assert result.returncode == 0, result.stderr
    no_complaint(result.stderr)
    own = native_prog.report(result.stdout)
    parts = [p for p in native_prog.process_files(str(tmp_path / "run"), own["pid"]) if ".part_" in p]
    assert len(parts) >= 2, sorted(os.listdir(tmp_path))
    total: dict[str, int] = {}
    for part in parts:
        for name, n in np_counts(load_profile(part)[0]).items():
            total[name] = total.get(name, 0) + n
    assert total == native_prog.launched(own), "every launch in exactly one part"


def test_trace_output_has_every_kernel_event(prog, tmp_path):
    result = profile(tmp_path, "-n", "run", "-d", "trace", prog, *ARGS)
    assert result.returncode == 0, result.stderr
    own = native_prog.report(result.stdout)
    with open(the_file(tmp_path, own["pid"], "chrome_trace")) as f:
        doc = json.load(f)
    counts: dict[str, int] = {}
    paths: dict[str, set] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "kernel" and e["name"].startswith("np_"):
            counts[e["name"]] = counts.get(e["name"], 0) + 1
            paths.setdefault(e["name"], set()).add(e["args"]["path"])
    assert counts == native_prog.launched(own)
    assert paths["np_scale"] == {"step/math"} and paths["np_fill"] == {"step"}, "NVTX ranges are the kernels' paths"
    assert isinstance(doc["baseTimeNanoseconds"], int)


def test_pprof_output_counts_every_launch(prog, tmp_path):
    from proton_core.formats import pprof_read

    result = profile(tmp_path, "-n", "run", "-o", "pprof", prog, *ARGS)
    assert result.returncode == 0, result.stderr
    own = native_prog.report(result.stdout)
    path = the_file(tmp_path, own["pid"], "pb.gz")
    with open(path, "rb") as f:
        assert gzip.decompress(f.read())  # gzipped profile.proto
    counts: dict[str, int] = {}
    for sample in pprof_read.read(path).samples:
        if sample.path and sample.path[-1].startswith("np_"):
            counts[sample.path[-1]] = counts.get(sample.path[-1], 0) + sample.values.get("gpu_kernel_launches", 0)
    assert counts == native_prog.launched(own)


# ---------------------------------------------------------------- (e) --no-follow ----
def test_no_follow_profiles_the_command_itself(prog, tmp_path):
    result = profile(tmp_path, "--no-follow", "-n", "run", prog, *ARGS)
    assert result.returncode == 0, result.stderr
    assert "only its own CUDA work is profiled" in result.stderr
    own = native_prog.report(result.stdout)
    root, _ = load_profile(the_file(tmp_path, own["pid"]))
    assert np_counts(root) == native_prog.launched(own)


def test_no_follow_leaves_the_program_a_python_script_runs_unprofiled(prog, tmp_path):
    script = parent_script(tmp_path, prog)
    result = profile(tmp_path, "--no-follow", "-n", "run", script)
    assert result.returncode == 0, result.stderr
    own = native_prog.report(result.stdout)
    assert own["kernels"]["np_fill"] == 4, "the program ran"
    assert not [f for f in os.listdir(tmp_path) if f.startswith("run.pid")], "nothing the script started is profiled"
    root, _ = load_profile(str(tmp_path / "run.hatchet"))
    assert sum(native_prog.kernel_counts(child(root, "parent")).values()) >= 7
    assert not np_counts(root)


def test_no_follow_leaves_the_program_a_python_command_runs_unprofiled(prog, tmp_path):
    script = parent_script(tmp_path, prog)
    result = profile(tmp_path, "--no-follow", "-n", "run", sys.executable, script)
    assert result.returncode == 0, result.stderr
    own = native_prog.report(result.stdout)
    assert own["kernels"]["np_fill"] == 4, "the program ran"
    assert not [f for f in os.listdir(tmp_path) if f.startswith("run.")], "--no-follow: a Python command is not " \
        "profiled, nor what it starts"
