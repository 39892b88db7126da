"""The README's example runs on a CPU machine and produces the expected tree."""

import os
import subprocess
import sys

import pytest

from proton_core.testing import load_profile as load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_runs_on_cpu(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PROTON_BACKEND": "host"}
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    root, devices = load(tmp_path / "quickstart.hatchet")
    (step,) = root["children"]
    assert step["frame"]["name"] == "train_step" and step["metrics"] == {"samples": 320}
    phases = {c["frame"]["name"]: c["metrics"]["cpu_time (ns)"] for c in step["children"]}
    assert set(phases) == {"forward", "backward", "optimizer"} and min(phases.values()) > 0
