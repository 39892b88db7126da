"""The synthetic backend with a native context setter (tests/native/channel.c), built once per run.

The synthetic backend keeps each thread's context in Python and offers no native setter, so
``hook="torch"`` would take its Python mode with it. :func:`native_fake` gives it the setter of
a small C library and keeps its per-thread context there: the core's scopes write it through
``set_context``, the operator callbacks through the capsule, and each launch reads it, as the
CUPTI backend does with its recorder's thread-local context.
"""

from __future__ import annotations

import ctypes
import os

import pytest

from proton_core.testing import NoCompiler, SyntheticBackend, build_library, native_context_capsule

HERE = os.path.dirname(os.path.abspath(__file__))


def build_channel(out: str):
    """tests/native/channel.c built into ``out`` and loaded (NoCompiler where none exists)."""
    lib = build_library(os.path.join(HERE, "native", "channel.c"), out)
    lib.channel_get.restype = ctypes.c_uint64
    lib.channel_set.argtypes = [ctypes.c_uint64]
    lib.channel_has_provider.restype = ctypes.c_int
    return lib


@pytest.fixture(scope="session")
def channel_lib(tmp_path_factory):
    try:
        return build_channel(str(tmp_path_factory.mktemp("channel") / "libchannel.so"))
    except NoCompiler as exc:
        pytest.skip(str(exc))


class NativeLocal:
    """Stands in for the synthetic backend's ``threading.local``: ``ctx`` lives in the C library."""

    def __init__(self, lib):
        self._lib = lib

    @property
    def ctx(self):
        return self._lib.channel_get()

    @ctx.setter
    def ctx(self, value):
        self._lib.channel_set(value)


@pytest.fixture(params=["provider", "publish"])
def native_fake(request, channel_lib, monkeypatch, fake):
    """``backend="fake"`` with a native context setter: hook="torch" runs natively with it. Each test
    runs twice: with the backend asking for each launch's context (capsule version 2, the CUPTI
    backend's way), and with a context set per operator (``PROTON_TORCH_PROVIDER=0``, as with a
    backend of version 1)."""
    monkeypatch.setenv("PROTON_TORCH_PROVIDER", "1" if request.param == "provider" else "0")
    capsule = native_context_capsule(channel_lib, "channel_native_context")
    init = SyntheticBackend.__init__

    def patched_init(self):
        init(self)
        self.local = NativeLocal(channel_lib)

    monkeypatch.setattr(SyntheticBackend, "native_context", capsule, raising=False)
    monkeypatch.setattr(SyntheticBackend, "__init__", patched_init)
    channel_lib.channel_set(0)
    yield fake
    channel_lib.channel_set(0)


def install_native_setter(out_dir: str):
    """:func:`native_fake` for a program of its own (a subprocess test), for the rest of that program:
    ``backend="fake"`` gets the channel library's native setter."""
    from proton_core.testing import use_synthetic_backend

    os.makedirs(out_dir, exist_ok=True)
    lib = build_channel(os.path.join(out_dir, "libchannel.so"))
    init = SyntheticBackend.__init__

    def patched_init(self):
        init(self)
        self.local = NativeLocal(lib)

    SyntheticBackend.native_context = native_context_capsule(lib, "channel_native_context")
    SyntheticBackend.__init__ = patched_init
    use_synthetic_backend()
    return lib
