"""rocprofiler-sdk takes a tool only before the ROCm runtime made its first queue: too late is one
line saying what to do, and proton_roctracer.attach() early makes a later session work.  Each case
runs in a process of its own (the SDK configures once per process)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("proton_roctracer._rocprofiler", reason="proton-profiler-roctracer extension not built")

PRELUDE = """
import ctypes, sys
sys.path.insert(0, {tests!r})
import roc_helpers
sim = roc_helpers.Sim({path!r})
"""


def run(sim_path, body, tmp_path):
    code = PRELUDE.format(tests=os.path.dirname(os.path.abspath(__file__)), path=sim_path) + textwrap.dedent(body)
    env = dict(os.environ, PROTON_ROCPROFILER_SDK_PATH=os.path.dirname(sim_path))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


def test_too_late_is_one_line_saying_what_to_do(sim_path, tmp_path):
    out = run(sim_path, """
        import proton_core as proton
        from proton_core.plugin_api import ProtonError
        sim.lib.simrocm_runtime_init()      # the program's first GPU call came first
        try:
            proton.start("p", backend="rocprofiler")
        except ProtonError as exc:
            print(exc)
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    assert "CONFIGURATION_LOCKED" in lines[0] and "proton_roctracer.attach()" in lines[0]
    assert "before the program's first GPU call" in lines[0]


def test_attach_before_the_runtime_then_start_later(sim_path, tmp_path):
    out = run(sim_path, """
        import proton_core as proton, proton_roctracer
        proton_roctracer.attach()           # right after import: before the first GPU call
        sim.lib.simrocm_runtime_init()
        sim.dispatch("before", duration_ns=1)
        proton.start("p", backend="rocprofiler")
        sim.dispatch("k", duration_ns=5)
        proton.finalize()
        print(sim.lib.simrocm_tool_attached())
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    text = (tmp_path / "p.hatchet").read_text()
    assert '"k"' in text and '"before"' not in text


def test_a_library_that_is_not_rocprofiler_sdk(tmp_path):
    fake = tmp_path / "librocprofiler-sdk.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), "-x", "c", "-"], input="int nothing(void){return 0;}",
                   text=True, check=True)
    env = dict(os.environ, PROTON_ROCPROFILER_SDK_PATH=str(tmp_path))
    code = textwrap.dedent("""
        import proton_core as proton
        from proton_core.plugin_api import ProtonError
        try:
            proton.start('p', backend='rocprofiler')
        except ProtonError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout
    assert "librocprofiler-sdk not found" in lines[0] and str(fake) in lines[0]
    assert "rocprofiler_force_configure missing" in lines[0]
