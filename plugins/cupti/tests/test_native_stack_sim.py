"""context="native" end to end on CPU: the real cupti backend against the simulated driver and CUPTI (tests/sim/),
launches made by a C library through the simulated libcuda.so.1, whose launch callback goes through the
simulated libcupti.so into the recorder: the path ends at the library's function, the driver's and
CUPTI's frames left out by their libraries' names.  Then a CUDA program without Python (tests/sim/
inject_client.c) under the injection entry point, as ``proton-profile -c native ./prog`` runs it."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest
import simcuda

from proton_core.testing import NoCompiler, build_library, find_all, get_plugins, load_profile

USER_C = """
#include <stdint.h>
extern uint32_t sim_launch(const char* kernel, uint32_t device, uint32_t stream, uint64_t duration_ns);

__attribute__((noinline)) static void step(int n) {  /* not exported: named from .symtab */
  for (int i = 0; i < n; ++i) sim_launch("kern_native", 0, 7, 100);
  __asm__ volatile("" ::: "memory");
}

void user_program(int n) {
  step(n);
  __asm__ volatile("" ::: "memory");
}
"""

PROGRAM = """
import ctypes
import proton_core as proton
user = ctypes.CDLL(LIB)
proton.start(OUT, backend="cupti", context=CONTEXT)
with proton.scope("outer"):
    user.user_program(3)
proton.finalize()
"""


@pytest.fixture(scope="module")
def user_library(cuda_sim, tmp_path_factory):
    folder = tmp_path_factory.mktemp("native_user")
    source = folder / "user.c"
    source.write_text(USER_C)
    out = str(folder / "libuser.so")
    try:
        # Built only: loaded here, it would bring the simulated libcuda.so.1 into the test process.
        build_library(str(source), out, f"-L{cuda_sim}", "-l:" + simcuda.DRIVER, f"-Wl,-rpath,{cuda_sim}", load=False)
    except NoCompiler as exc:
        pytest.skip(str(exc))
    return out


def profile(cuda_sim, tmp_path, library, context):
    out = str(tmp_path / "prof")
    code = f"LIB = {library!r}\nOUT = {out!r}\nCONTEXT = {context!r}\n" + textwrap.dedent(PROGRAM)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env=simcuda.environment(cuda_sim), timeout=120)
    assert proc.returncode == 0, proc.stderr
    root, _ = load_profile(out + ".hatchet")
    return find_all(root, lambda name: name == "kern_native")


def needs_native_context():
    if get_plugins().contexts.get("native") is None:
        pytest.skip("context='native' is not registered: the core's DEFAULT_PLUGINS (proton_core/plugins.py) does "
                    "not list proton_core.contexts.native yet")


def test_a_launch_through_the_driver_ends_at_the_callers_function(cuda_sim, tmp_path, user_library):
    needs_native_context()
    found = profile(cuda_sim, tmp_path, user_library, "native")
    assert sum(node["metrics"]["count"] for _, node in found) == 3
    (path, _), = found
    assert path[0] == "outer"
    assert path[-3:-1] == ("user_program (libuser.so)", "step (libuser.so)"), path
    assert not any(lib in name for name in path for lib in (simcuda.DRIVER, simcuda.CUPTI, "_cupti.")), path


def test_the_shadow_context_has_no_frames_against_the_same_driver(cuda_sim, tmp_path, user_library):
    found = profile(cuda_sim, tmp_path, user_library, "shadow")
    assert [(path, node["metrics"]["count"]) for path, node in found] == [(("outer", "kern_native"), 3)]


@pytest.mark.parametrize("where", ["main", "on-thread"])
def test_a_cuda_program_without_python_gets_its_native_stacks(cuda_sim, tmp_path, where):
    """inject_client.c launches from workload(), called by main() or run on a thread of its own: kernels
    land under the NVTX ranges, then main / workload or workload alone (how the process or the thread
    began is left out); a graph's replays under <captured_at> and the capture's own frames."""
    needs_native_context()
    injected = pytest.importorskip("proton_cupti.injected", reason="proton_cupti has no injection entry point")
    reason = injected.unavailable_reason()
    if reason is not None:
        pytest.skip(f"the injection entry point cannot run here: {reason}")
    client = simcuda.build_client(cuda_sim)
    options = {"name": str(tmp_path / "inj"), "backend": "cupti", "context": "native"}
    env = dict(os.environ, PROTON_FOLLOW=json.dumps(options))  # what proton-profile gives a command
    env.update(injected.environment(options))
    args = [client, "return"] + (["on-thread"] if where == "on-thread" else [])
    proc = subprocess.run(args, env=simcuda.environment(cuda_sim, env), cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 7, proc.stderr
    (written,) = glob.glob(str(tmp_path / "inj*.hatchet"))
    root, _ = load_profile(written)
    frames = ("main (inject_client)", "workload (inject_client)") if where == "main" else ("workload (inject_client)",)
    found = {path[-1]: (path, node["metrics"]["count"]) for path, node in find_all(root, lambda n: n.startswith("k_"))}
    assert found["k_outer"] == (("outer",) + frames + ("k_outer",), 2)
    assert found["k_inner"] == (("outer", "inner") + frames + ("k_inner",), 3)
    assert found["k_top"] == (frames + ("k_top",), 1)
    (graph_path, graph_node), = [(p, n) for p, n in find_all(root, lambda n: n == "g_a")]
    assert graph_path == ("replay",) + frames + ("<captured_at>", "capture") + frames + ("g_a",)
    assert graph_node["metrics"]["count"] == 2
