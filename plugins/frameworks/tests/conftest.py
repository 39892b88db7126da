"""Fixtures for the frameworks plugin: the core's fake backend, a clean manager, GPU skipping."""

import ctypes
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..", "..", "tests")))  # the core's fake backend

import fake_backend  # noqa: E402
from proton_core.context import THREAD  # noqa: E402
from proton_core.plugins import get_plugins  # noqa: E402
from proton_core.session import MANAGER  # noqa: E402


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


@pytest.fixture(autouse=True)
def clean_manager():
    """Every test starts with no session and leaves none behind."""
    plugins = get_plugins()
    if "fake" not in plugins.backends.items:
        plugins.register(fake_backend, name="fake_backend", distribution="tests")
    yield
    MANAGER.cli_owned = False
    with MANAGER.lock:
        MANAGER._close(list(MANAGER.sessions.values()), plugins)
        MANAGER.sessions.clear()
        MANAGER._refresh()
    THREAD.stack.clear()
    THREAD.state = None
    THREAD.op = None
    THREAD.recompute()


@pytest.fixture
def fake():
    """Launch synthetic kernels on the calling thread: ``fake.launch(name, ns)``."""

    class Handle:
        @property
        def backend(self):
            return fake_backend.FakeBackend.instance

        def launch(self, *a, **k):
            self.backend.launch(*a, **k)

    return Handle()
