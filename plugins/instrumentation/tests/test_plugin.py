"""Registration and the one-line reasons ``available()`` gives where the backend cannot run."""

import importlib.metadata

import pytest

import proton_core as proton
from proton_core.plugin_api import ProtonError
from proton_core.testing import get_plugins
from proton_instrumentation import plugin


def test_registered_as_a_backend_with_the_default_mode():
    assert get_plugins().record("instrumentation").kinds == ["backend"]
    entry = get_plugins().backends.get("instrumentation")
    assert entry.modes == ("default",) and entry.priority < 0  # never picked automatically


def test_reason_when_triton_is_missing(monkeypatch):
    monkeypatch.setattr(plugin.importlib.util, "find_spec", lambda name: None)
    assert plugin.available().startswith("Triton is not installed")


def test_reason_when_triton_is_too_old(monkeypatch):
    monkeypatch.setattr(plugin.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(plugin.importlib.metadata, "version", lambda name: "3.5.1")
    assert plugin.available() == "triton 3.5.1 is too old: intra-kernel instrumentation needs Triton 3.6 or newer"


def test_reason_without_an_nvidia_driver(monkeypatch):
    monkeypatch.setattr(plugin.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(plugin.importlib.metadata, "version", lambda name: "3.6.0")

    def no_lib(name):
        raise OSError(name)

    monkeypatch.setattr(plugin.ctypes, "CDLL", no_lib)
    assert "NVIDIA GPUs only" in plugin.available()


def test_reason_when_libtriton_lacks_the_passes(monkeypatch):
    monkeypatch.setattr(plugin.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(plugin.importlib.metadata, "version", lambda name: "3.7.0")
    monkeypatch.setattr(plugin.ctypes, "CDLL", lambda name: None)
    plugin._libtriton_reason.cache_clear()
    from proton_instrumentation import compiler_hook

    monkeypatch.setattr(compiler_hook, "missing_passes", lambda proton=None: ["add_convert_proton_to_protongpu"])
    try:
        assert plugin.available().startswith("triton 3.7.0's libtriton lacks the proton passes")
    finally:
        plugin._libtriton_reason.cache_clear()


def test_start_without_triton_says_why_in_one_line():
    try:
        importlib.metadata.version("triton")
        pytest.skip("Triton is installed here")
    except importlib.metadata.PackageNotFoundError:
        pass
    with pytest.raises(ProtonError) as err:
        proton.start("x", backend="instrumentation")
    assert str(err.value).startswith("backend 'instrumentation' cannot run here: Triton is not installed")
