"""Programs without Python under ``proton-profile``: the command's environment names the cupti plugin's
injection library, and the library boots the profiler in a C program (no GPU here: the session's backend
is the host one; plugins/cupti/tests/test_injection_sim.py drives it against a simulated CUPTI)."""

import ctypes
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from distributed_helpers import cli

pytestmark = pytest.mark.skipif(importlib.util.find_spec("proton_cupti") is None, reason="proton-profiler-cupti is not installed")

ENV_DUMP = """#!/bin/sh
env > "$1"
"""

CLIENT = r"""
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char** argv) {
  void* h = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW);
  if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 90; }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  const char* (*state)(void) = (const char* (*)(void))dlsym(h, "proton_inject_state");
  int ok = init();
  printf("%d %s\n", ok, state());
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "term") == 0) { raise(SIGTERM); sleep(5); return 91; }
  if (argc > 1 && strcmp(argv[1], "fork") == 0) {
    pid_t p = fork();
    if (p == 0) exit(0);
    int st = 0; waitpid(p, &st, 0);
  }
  return argc > 2 ? atoi(argv[2]) : 0;
}
"""


def library():
    from proton_cupti import injected

    return injected.library_path()


need_library = pytest.mark.skipif(importlib.util.find_spec("proton_cupti") is None or library() is None,
                                  reason="libproton_inject.so is not built")


def env_of(path) -> dict:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@need_library
def test_a_command_gets_the_injection_environment(tmp_path):
    from proton_cupti import injected

    script = tmp_path / "dump.sh"
    script.write_text(ENV_DUMP)
    script.chmod(0o755)
    result = cli(tmp_path, "-n", "out", str(script), str(tmp_path / "env.txt"))
    assert result.returncode == 0, result.stderr
    env = env_of(tmp_path / "env.txt")
    assert env["CUDA_INJECTION64_PATH"] == injected.library_path()
    assert os.path.isfile(env["PROTON_INJECT_PYTHON_LIB"]) and ".so" in env["PROTON_INJECT_PYTHON_LIB"]
    assert json.loads(env["PROTON_FOLLOW"])["name"] == str(tmp_path / "out")
    if importlib.util.find_spec("proton_nvtx") is not None:  # NVTX goes through the library to the NVTX plugin's
        assert env["NVTX_INJECTION64_PATH"] == injected.library_path()
        assert env["PROTON_NVTX_LIB"] == injected.nvtx_library()
    assert "PROTON_INJECT_NO_FOLLOW" not in env
    assert env["LD_PRELOAD"].split()[0] == injected.library_path()  # its exec*() wrappers come before libc's

    result = cli(tmp_path, "--no-follow", "-n", "out", str(script), str(tmp_path / "env2.txt"))
    env = env_of(tmp_path / "env2.txt")
    assert env["PROTON_INJECT_NO_FOLLOW"] == "1" and env["CUDA_INJECTION64_PATH"] == injected.library_path()
    assert "only its own CUDA work is profiled" in result.stderr


@need_library
def test_another_backend_sets_no_injection(tmp_path):
    script = tmp_path / "dump.sh"
    script.write_text(ENV_DUMP)
    script.chmod(0o755)
    result = cli(tmp_path, "-b", "host", "-n", "out", str(script), str(tmp_path / "env.txt"))
    assert result.returncode == 0, result.stderr
    assert "CUDA_INJECTION64_PATH" not in env_of(tmp_path / "env.txt")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("client")
    (d / "client.c").write_text(CLIENT)
    subprocess.run([cc, "-o", str(d / "client"), str(d / "client.c"), "-ldl"], check=True)
    return str(d / "client")


def injected_env(tmp_path, **extra):
    from proton_core import follow
    from proton_cupti import injected

    options = {"name": str(tmp_path / "out"), "backend": "host"}
    env = follow.child_environment(options)
    env.update({k: v for k, v in injected.environment({}).items()})  # as for the cupti backend
    env.update(extra)
    return env


@need_library
def test_the_library_boots_the_profiler_in_a_c_program(tmp_path, client):
    result = subprocess.run([client, "run", "7"], env=injected_env(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 7, result.stderr  # the program's own status
    assert result.stdout.split() == ["1", "booted"], result.stderr
    assert "Traceback" not in result.stderr and "unprofiled" not in result.stderr


@need_library
def test_sigterm_still_kills_the_program_after_the_write(tmp_path, client):
    result = subprocess.run([client, "term"], env=injected_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGTERM, (result.returncode, result.stderr)
    assert result.stdout.split() == ["1", "booted"] and "Traceback" not in result.stderr


@need_library
def test_a_forked_child_without_exec_says_it_is_not_profiled(tmp_path, client):
    result = subprocess.run([client, "fork"], env=injected_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "without exec, is not profiled" in result.stderr


@need_library
def test_without_proton_profile_the_library_does_nothing(tmp_path, client):
    env = {k: v for k, v in injected_env(tmp_path).items() if k != "PROTON_FOLLOW"}
    result = subprocess.run([client], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout.split()) == (0, ["1", "skipped"]), result.stderr


@need_library
def test_in_a_python_process_the_library_leaves_it_to_the_start_up_hook(tmp_path):
    code = ("import ctypes, os; lib = ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH']); "
            "lib.proton_inject_state.restype = ctypes.c_char_p; "
            "print(lib.InitializeInjection(), lib.proton_inject_state().decode())")
    env = injected_env(tmp_path)
    env.pop("PYTHONPATH", None)  # not followed itself: only the library is under test
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["1", "python", "process"], result.stderr


def test_python_library_is_found_or_named():
    from proton_cupti import injected

    path = injected.python_library()
    assert path is None or ctypes.CDLL(path).Py_IsInitialized is not None


def test_a_foreign_injection_is_named_once(caplog):
    from proton_cupti import injected

    os.environ["CUDA_INJECTION64_PATH"] = "/opt/other/libtool_inject.so"
    try:
        with caplog.at_level("WARNING", logger="proton"):
            injected.say_if_foreign_injection()
            injected.say_if_foreign_injection()
    finally:
        del os.environ["CUDA_INJECTION64_PATH"]
    lines = [r.getMessage() for r in caplog.records if "libtool_inject" in r.getMessage()]
    assert len(lines) == 1 and "another tool" in lines[0]


@need_library
def test_no_follow_gives_a_python_command_no_injection(tmp_path):
    code = "import os; print(os.environ.get('CUDA_INJECTION64_PATH', 'none'), os.environ.get('PROTON_FOLLOW', 'none'))"
    result = cli(tmp_path, "--no-follow", "-n", "out", sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["none", "none"]  # nothing it starts can load the profiler
