"""Phases, periodic flushing and exit-safe writing on the AMD backend, through the simulated ROCm."""

import os
import subprocess
import sys
import textwrap

import proton_core as proton
from proton_core.testing import load_profile


def count(path, kernel="k"):
    node = [c for c in load_profile(path)[0]["children"] if c["frame"]["name"] == kernel]
    return node[0]["metrics"]["count"] if node else 0


def test_launches_end_phases_at_n_however_fast(script, tmp_path):
    sim = script
    sid = proton.start(str(tmp_path / "run"), backend="rocprofiler", mode="periodic_flushing:launches=300:poll=3600")
    for _ in range(1500):
        sim.dispatch("k", duration_ns=1)
    paths = proton.finalize(sid)
    assert [count(p) for p in paths] == [300] * 5


def test_phases_file_kernels_by_launch(script, tmp_path):
    sim = script
    sid = proton.start(str(tmp_path / "p"), backend="rocprofiler")
    sim.dispatch("k", duration_ns=1)
    proton.data.advance_phase(sid)
    sim.dispatch("k", duration_ns=1)
    sim.dispatch("k", duration_ns=1)
    first = proton.data.get(sid, 0)
    proton.finalize()
    root = first[0] if isinstance(first, list) else first
    assert [c["metrics"]["count"] for c in root["children"] if c["frame"]["name"] == "k"] == [1]


def test_exit_without_finalize_writes_the_profile(sim_path, tmp_path):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import roc_helpers, proton_core as proton
        sim = roc_helpers.Sim({sim_path!r})
        proton.start("p", backend="rocprofiler")
        with proton.scope("s"):
            for _ in range(7):
                sim.dispatch("k", duration_ns=3)
    """)
    env = dict(os.environ, PROTON_ROCPROFILER_SDK_PATH=os.path.dirname(sim_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    root = load_profile(str(tmp_path / "p.hatchet"))[0]
    s = [c for c in root["children"] if c["frame"]["name"] == "s"][0]
    k = [c for c in s["children"] if c["frame"]["name"] == "k"][0]
    assert (k["metrics"]["count"], k["metrics"]["time (ns)"]) == (7, 21)
