"""Fixtures for the frameworks plugin: the core's fake backend, a clean manager, GPU skipping."""

import ctypes
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..", "tests")))  # the core's fake backend

from proton_fixtures import clean_manager, fake  # noqa: E402,F401


def _cuda_gpu_reason():
    """None when a CUDA GPU is usable here, else why not."""
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(lib)
            break
        except OSError:
            cuda = None
    if cuda is None:
        return "no CUDA driver (libcuda) on this machine"
    if cuda.cuInit(0) != 0:
        return "CUDA driver present but cuInit failed (no usable GPU)"
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA GPU visible"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords and str(i.fspath).startswith(HERE)]
    if not gpu_items:
        return
    reason = _cuda_gpu_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))
