"""context="native" on a real GPU: launches through libcuda and libcupti end their path at the caller's function.

Each case runs in its own interpreter, as a program would (CUPTI's one subscription, the unwinder chosen
once per process).  The caller is the test bindings' ``test_user_noop_launches``: empty-kernel launches
through cuLaunchKernel from C, as a CUDA program without Python makes them.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from cupti_helpers import walk
from proton_core.testing import get_plugins

pytestmark = pytest.mark.gpu

CALLER = "proton_cupti::test_user_noop_launches"  # then "(" or an ABI tag ("[abi:cxx11](")

PROGRAM = """
    import proton_core as proton
    from proton_cupti import _cupti

    assert _cupti._test_launch_noop(10) == ""  # module load and context, before profiling
    proton.start("prof", backend="cupti", context=CONTEXT)
    with proton.scope("work"):
        assert _cupti._test_user_noop_launches(1000, 3) == ""
    proton.finalize()
    print(_cupti._test_native_unwinder())
"""


def run(tmp_path, context, unwinder=""):
    _cupti = pytest.importorskip("proton_cupti._cupti")
    if not hasattr(_cupti, "_test_user_noop_launches"):
        pytest.skip("proton_cupti._cupti was built without PROTON_CUPTI_TESTING=ON")
    code = f"CONTEXT = {context!r}\n" + textwrap.dedent(PROGRAM)
    env = {**os.environ, "PROTON_NATIVE_UNWINDER": unwinder}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    root = json.loads((tmp_path / "prof.hatchet").read_text())[0]
    (work,) = [c for c in root["children"] if c["frame"]["name"] == "work"]
    found = [(path, n["metrics"]) for path, n in walk(work) if n["frame"]["name"] == "proton_noop"]
    return found, proc.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("unwinder", ["", "backtrace"], ids=["default", "glibc"])
def test_a_real_launch_ends_its_path_at_the_callers_symbol(tmp_path, unwinder):
    if get_plugins().contexts.get("native") is None:
        pytest.skip("context='native' is not registered: the core's DEFAULT_PLUGINS (proton_core/plugins.py) does "
                    "not list proton_core.contexts.native yet")
    found, used = run(tmp_path, "native", unwinder)
    assert used in ("libunwind", "backtrace") and (used == "backtrace" or not unwinder)
    assert sum(m["count"] for _, m in found) == 1000
    for path, _ in found:
        frames = path[:-1]
        assert frames[-1].startswith(CALLER), frames[-4:]  # the launch machinery below it is gone
        assert sum(f.startswith(CALLER) for f in frames) == 4  # the caller and its 3 recursions, in order
        assert not any(lib in f for f in frames for lib in ("libcuda.so", "libcupti.so", "libcudart.so")), frames


def test_the_shadow_context_files_the_same_launches_without_frames(tmp_path):
    found, _ = run(tmp_path, "shadow")
    assert [(path, m["count"]) for path, m in found] == [(("proton_noop",), 1000)]
