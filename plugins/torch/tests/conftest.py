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
import shutil
import subprocess

import pytest

from proton_core.testing import SyntheticBackend

HERE = os.path.dirname(os.path.abspath(__file__))
# PyCapsule_New keeps the name's address, not a copy: the name lives as long as the module.
CAPSULE_NAME = ctypes.create_string_buffer(b"proton.native_context.v1")


@pytest.fixture(scope="session")
def channel_lib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the test context setter")
    out = str(tmp_path_factory.mktemp("channel") / "libchannel.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", out, os.path.join(HERE, "native", "channel.c")], check=True)
    lib = ctypes.CDLL(out)
    lib.channel_get.restype = ctypes.c_uint64
    lib.channel_set.argtypes = [ctypes.c_uint64]
    return lib


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


@pytest.fixture
def native_fake(channel_lib, monkeypatch, fake):
    """``backend="fake"`` with a native context setter: hook="torch" runs natively with it."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(ctypes.c_char.in_dll(channel_lib, "channel_native_context")),
                  ctypes.addressof(CAPSULE_NAME), None)
    init = SyntheticBackend.__init__

    def patched_init(self):
        init(self)
        self.local = NativeLocal(channel_lib)

    monkeypatch.setattr(SyntheticBackend, "native_context", capsule, raising=False)
    monkeypatch.setattr(SyntheticBackend, "__init__", patched_init)
    channel_lib.channel_set(0)
    yield fake
    channel_lib.channel_set(0)
