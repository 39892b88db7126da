"""The AMD extension loads beside every other native extension of Proton in one process (it once used
initial-exec TLS, and the static TLS left after the cupti extension loaded was too small for it)."""

import subprocess
import sys

import pytest


def test_loads_after_the_other_extensions():
    others = [m for m in ("proton_cupti._cupti", "proton_nvtx._inject") if _importable(m)]
    if not others:
        pytest.skip("no other Proton extension installed")
    code = "; ".join(f"import {m}" for m in others) + "; import proton_roctracer._rocprofiler; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _importable(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0
