"""Builds the native NVTX client (tests/native/nvtx_client.c) once per run."""

from __future__ import annotations

import ctypes
import os

import pytest

from proton_core.testing import NoCompiler, build_library

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def client(tmp_path_factory):
    """The native client library, attached to Proton's injection library (ctypes handle)."""
    out = str(tmp_path_factory.mktemp("nvtx_client") / "libnvtx_client.so")
    try:
        lib = build_library(os.path.join(HERE, "native", "nvtx_client.c"), out, "-lpthread", "-ldl")
    except NoCompiler as exc:
        pytest.skip(str(exc))
    lib.client_push.argtypes = [ctypes.c_char_p]
    lib.client_push_w.argtypes = [ctypes.c_wchar_p]
    lib.client_domain.restype = ctypes.c_void_p
    lib.client_domain.argtypes = [ctypes.c_char_p]
    lib.client_domain_push.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.client_domain_pop.argtypes = [ctypes.c_void_p]
    lib.client_start.restype = ctypes.c_uint64
    lib.client_start.argtypes = [ctypes.c_char_p]
    lib.client_end.argtypes = [ctypes.c_uint64]
    lib.client_mark.argtypes = [ctypes.c_char_p]
    lib.client_innermost_seen.restype = ctypes.c_uint64
    lib.client_run_thread.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_uint64]
    assert lib.client_init() == 1, "the injection library did not attach (NVTX_INJECTION64_PATH?)"
    return lib
