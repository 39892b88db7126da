"""Test support for Proton and its plugins: a pytest plugin with the synthetic backend.

Load it with ``-p proton_core.testing`` (this repository's pytest settings
do) or ``pytest_plugins = ["proton_core.testing"]`` in a top-level conftest.
It gives:

* the synthetic backend ``fake`` (:class:`SyntheticBackend`): a pure-Python
  model of what a native backend does per launch, so attribution is checked
  exactly on CPU; the ``fake`` fixture reaches the live instance;
* :class:`BackendContract`, the test suite every backend must pass (subclass
  it with a ``driver`` fixture; the synthetic and the native CUPTI recorder do);
* an autouse fixture that leaves no session, scope or CLI ownership behind;
* the ``gpu`` marker: such tests are skipped, with the reason, where no
  CUDA GPU with a working CUPTI backend is present;
* :func:`build_library` and :func:`native_context_capsule` for tests of native paths,
  :class:`PendingScope`, a settler standing in for a plugin's own frames,
* :func:`load_profile` and :func:`child` to read written profiles,
  :func:`open_session_ids` and :func:`get_plugins` to inspect the core.
"""

from __future__ import annotations

import ctypes
import functools
import threading

import pytest

from ..context import reset_thread
from ..formats.hatchet import read_document as load_profile
from ..plugins import get_plugins
from ..manager import MANAGER
from .contract import BackendContract, Driver, chains
from .native import NoCompiler, build_library, native_context_capsule
from .settlers import PendingScope
from .engine import add_setter, engine_counts, launch_op_cache
from .synthetic import SyntheticBackend, SyntheticDriver, SyntheticPlugin

__all__ = [
    "SyntheticBackend", "SyntheticDriver", "BackendContract", "Driver", "chains", "use_synthetic_backend", "reset",
    "open_session_ids", "get_plugins", "gpu_missing_reason", "load_profile", "child",
    "NoCompiler", "build_library", "native_context_capsule", "run_threads", "PendingScope",
    "launch_op_cache", "engine_counts", "add_setter", "child_names", "find_all",
]



def use_synthetic_backend() -> None:
    """Make ``backend="fake"`` available (idempotent)."""
    plugins = get_plugins()
    if plugins.backends.get("fake") is None:
        plugins.register(SyntheticPlugin, name="synthetic_backend", distribution="proton (testing)")


def child(literal: dict, *names: str) -> dict:
    """Follow child names down from a hatchet literal node (of :func:`load_profile`); fail saying what is there."""
    for name in names:
        matches = [c for c in literal["children"] if c["frame"]["name"] == name]
        assert matches, (f"no child {name!r} under {literal['frame']['name']!r}: "
                         f"{[c['frame']['name'] for c in literal['children']]}")
        literal = matches[0]
    return literal


def child_names(literal: dict) -> list[str]:
    """The names of a hatchet literal node's children, in file order."""
    return [c["frame"]["name"] for c in literal["children"]]


def find_all(literal: dict, predicate, prefix=()) -> list:
    """Every (path of names, node) below a hatchet literal node whose name satisfies ``predicate``."""
    out = []
    for node in literal["children"]:
        path = prefix + (node["frame"]["name"],)
        if predicate(node["frame"]["name"]):
            out.append((path, node))
        out.extend(find_all(node, predicate, path))
    return out


def run_threads(target, count: int) -> None:
    """Run ``target()`` on ``count`` new threads at once and wait for all of them."""
    threads = [threading.Thread(target=target) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def open_session_ids() -> list[int]:
    """Ids of the sessions not finalized yet."""
    return list(MANAGER.sessions)


def reset() -> None:
    """Close every session unwritten and clear the calling thread's scopes."""
    MANAGER.reset()
    reset_thread()


# ---------------------------------------------------------------- fixtures ----
@pytest.fixture(autouse=True)
def proton_clean_manager():
    """Every test starts with the synthetic backend and no session, and leaves none behind."""
    use_synthetic_backend()
    yield
    reset()


@pytest.fixture
def fake():
    """The synthetic backend: ``fake.backend`` is the live instance, ``fake.launch(...)`` launches."""

    class Handle:
        @property
        def backend(self) -> SyntheticBackend:
            return SyntheticBackend.instance

        def launch(self, *args, **kwargs):
            self.backend.launch(*args, **kwargs)

    return Handle()


# --------------------------------------------------------------------- gpu ----
@functools.lru_cache(maxsize=None)
def gpu_missing_reason() -> str | None:
    """None when a CUDA GPU and the cupti backend are usable here, else why not."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver (libcuda.so.1) on this machine"
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA GPU visible"
    entry = get_plugins().backends.get("cupti")
    if entry is None:
        return "the cupti backend (proton-profiler-cupti) is not installed"
    return entry.unavailable_reason()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with CUPTI (skipped elsewhere, with the reason)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = gpu_missing_reason() if gpu_items else None
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU with CUPTI: {reason}"))
