"""Registration and automatic choice: rocprofiler on an AMD GPU with a working SDK, never here."""

import pytest
from proton_core.testing import get_plugins

from proton_roctracer import plugin


def test_both_names_registered():
    backends = get_plugins().backends
    assert backends.get("rocprofiler").priority == 90
    assert backends.get("roctracer").priority == 0  # never auto-picked: start() names one backend
    assert get_plugins().record("roctracer").kinds == ["backend"]


def test_no_amd_gpu_here_means_not_available(monkeypatch, tmp_path):
    monkeypatch.setattr(plugin, "KFD", str(tmp_path / "kfd"))
    assert plugin.available() == f"no AMD GPU ({tmp_path / 'kfd'} is absent)"


def test_auto_picks_rocprofiler_where_it_is_available(monkeypatch, tmp_path):
    monkeypatch.setattr(plugin, "amd_gpu_reason", lambda: None)
    monkeypatch.setenv("PROTON_ROCPROFILER_SDK_PATH", str(tmp_path))
    (tmp_path / "librocprofiler-sdk.so.1").write_text("")
    cupti = get_plugins().backends.get("cupti")
    if cupti is not None and cupti.unavailable_reason() is None:
        pytest.skip("an NVIDIA machine: cupti outranks rocprofiler there")
    assert plugin.available() is None
    from proton_core.manager import MANAGER

    assert MANAGER._auto_backend(get_plugins()) == "rocprofiler"
