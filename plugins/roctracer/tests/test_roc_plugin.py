"""Registration and automatic choice: rocprofiler on an AMD GPU with a working SDK, never here."""

import pytest

import proton_core as proton
from proton_core.testing import get_plugins, load_profile

from proton_roctracer import plugin


def test_both_names_registered():
    backends = get_plugins().backends
    assert backends.get("rocprofiler").priority == 90
    assert backends.get("roctracer").priority == 0  # never auto-picked: start() names one backend
    assert get_plugins().record("roctracer").kinds == ["backend"]


def test_no_amd_gpu_here_means_not_available(monkeypatch, tmp_path):
    monkeypatch.setattr(plugin, "KFD", str(tmp_path / "kfd"))
    assert plugin.available() == f"no AMD GPU ({tmp_path / 'kfd'} is absent)"


def test_start_picks_rocprofiler_where_it_is_available(monkeypatch, script, tmp_path):
    sim = script  # PROTON_ROCPROFILER_SDK_PATH names the simulator's folder
    cupti = get_plugins().backends.get("cupti")
    if cupti is not None and cupti.unavailable_reason() is None:
        pytest.skip("an NVIDIA machine: cupti outranks rocprofiler there")
    monkeypatch.setattr(plugin, "amd_gpu_reason", lambda: None)  # as if /dev/kfd were there
    assert plugin.available() is None
    proton.start(str(tmp_path / "p"))  # no backend named
    sim.dispatch("k", duration_ns=4)
    proton.finalize()
    root, _ = load_profile(str(tmp_path / "p.hatchet"))
    assert root["metadata"]["backend"] == "rocprofiler"
    assert [c["metrics"]["time (ns)"] for c in root["children"] if c["frame"]["name"] == "k"] == [4]
