"""Fixtures of the cupti plugin's tests; ``gpu`` tests skip without a GPU and CUPTI."""

import ctypes
import functools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@functools.lru_cache(maxsize=None)
def gpu_missing_reason():
    """None when a CUDA device and libcupti are usable here, else why not."""
    try:
        from proton_cupti.plugin import available
    except ImportError as exc:
        return f"proton-cupti is not installed ({exc})"
    reason = available()
    if reason:
        return reason
    cuda = ctypes.CDLL("libcuda.so.1")
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA device visible"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and str(item.fspath).startswith(os.path.dirname(__file__)):
            reason = gpu_missing_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU with CUPTI: {reason}"))


@pytest.fixture(autouse=True)
def no_session_left():
    """Every test leaves no Proton session open, even when it fails."""
    yield
    from proton_core.plugins import get_plugins
    from proton_core.session import MANAGER

    with MANAGER.lock:
        MANAGER._close(list(MANAGER.sessions.values()), get_plugins())
        MANAGER.sessions.clear()
        MANAGER._refresh()
