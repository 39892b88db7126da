"""Test support for Proton and its plugins: a pytest plugin with the synthetic backend.

Load it with ``-p proton_core.testing`` (this repository's pytest settings
do) or ``pytest_plugins = ["proton_core.testing"]`` in a top-level conftest.
It gives:

* the synthetic backend ``fake`` (:class:`SyntheticBackend`): a pure-Python
  model of what a native backend does per launch, so attribution is checked
  exactly on CPU; the ``fake`` fixture reaches the live instance;
* an autouse fixture that leaves no session, scope or CLI ownership behind;
* the ``gpu`` marker: such tests are skipped, with the reason, where no
  CUDA GPU with a working CUPTI backend is present;
* :func:`load_profile` and :func:`child` to read written profiles,
  :func:`open_session_ids` and :func:`get_plugins` to inspect the core.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time

import pytest

from .backend import NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, Backend, Batch
from .context import capture_frames, register_internal_path, reset_thread
from .plugins import get_plugins, hookimpl
from .session import MANAGER

register_internal_path(__file__)

DEVICE = {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 3201000, "bus_width": 6144}
DEVICES = {"CUDA": {"0": dict(DEVICE), "1": dict(DEVICE)}}


class SyntheticBackend(Backend):
    """Feeds synthetic kernel records through the backend contract.

    Per launch it does what a native backend does: read the thread's context
    id, optionally walk Python frames, intern the chain in a trie, and
    aggregate by (epoch, node, kernel, device).  Graph capture and replay
    re-root the captured chains under ``<captured_at>``.
    """

    device_type = "CUDA"
    instance = None

    def __init__(self) -> None:
        SyntheticBackend.instance = self
        self.local = threading.local()
        self.lock = threading.Lock()
        self.trie: dict[tuple, int] = {}
        self.new_nodes: list = []
        self.records: dict[tuple, list] = {}
        self.events: list = []
        self.epoch = 0
        self.python_frames = False
        self.trace = False
        self.started = 0
        self.stopped = 0
        self.dropped = 0

    # ------------------------------------------------------------ contract ----
    def start(self, mode):
        self.started += 1

    def stop(self):
        self.stopped += 1

    def configure(self, *, python_frames, trace):
        self.python_frames, self.trace = python_frames, trace

    def set_epoch(self, epoch):
        self.epoch = epoch

    def set_context(self, context_id):
        self.local.ctx = context_id

    def flush(self):
        with self.lock:
            records = [(*k, v[0], v[1]) for k, v in self.records.items()]
            batch = Batch(nodes=self.new_nodes, records=records, events=self.events, dropped=self.dropped,
                          devices=DEVICES, device_type="CUDA")
            self.new_nodes, self.records, self.events, self.dropped = [], {}, [], 0
        return batch

    # ------------------------------------------------------------- helpers ----
    def _intern(self, parent, kind, value):
        key = (parent, kind, value)
        node = self.trie.get(key)
        if node is None:
            node = self.trie[key] = len(self.trie) + 1
            self.new_nodes.append((node, parent, kind, value))
        return node

    def _chain(self):
        chain = []
        if self.python_frames:
            chain += [(NODE_FRAME, f) for f in capture_frames()]
        chain.append((NODE_CONTEXT, getattr(self.local, "ctx", 0)))
        return chain

    def _record(self, epoch, chain, kernel, duration_ns, device, stream, launch_ns):
        with self.lock:
            node = 0
            for kind, value in chain:
                node = self._intern(node, kind, value)
            stats = self.records.setdefault((epoch, node, kernel, device), [0, 0])
            stats[0] += duration_ns
            stats[1] += 1
            if self.trace:
                start = time.monotonic_ns()
                self.events.append((epoch, node, kernel, device, stream, start, start + duration_ns, launch_ns,
                                    threading.get_native_id()))

    def launch(self, kernel, duration_ns=1000, device=0, stream=7):
        """One kernel launch from the calling thread."""
        if self.epoch == 0:
            return
        self._record(self.epoch, self._chain(), kernel, duration_ns, device, stream, time.monotonic_ns())

    def capture(self, kernels):
        """Capture a graph of ``[(kernel, duration_ns)]`` at the current path."""
        chain = self._chain() if self.epoch else None
        return [(k, d, chain) for k, d in kernels]

    def replay(self, graph, device=0):
        if self.epoch == 0:
            return
        launch_chain = self._chain()
        for kernel, duration, captured in graph:
            chain = launch_chain + ([(NODE_CAPTURED_AT, None)] + captured if captured else [])
            self._record(self.epoch, chain, kernel, duration, device, 7, time.monotonic_ns())


class SyntheticPlugin:
    """The plugin object registering :class:`SyntheticBackend` as ``fake``."""

    @staticmethod
    @hookimpl
    def proton_register_backends(register):
        register("fake", SyntheticBackend, priority=-1, modes=("fastmode",),
                 description="synthetic records for tests (proton_core.testing)")


def use_synthetic_backend() -> None:
    """Make ``backend="fake"`` available (idempotent)."""
    plugins = get_plugins()
    if plugins.backends.get("fake") is None:
        plugins.register(SyntheticPlugin, name="synthetic_backend", distribution="proton (testing)")


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
        return "the cupti backend (proton-cupti) is not installed"
    return entry.unavailable_reason()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU with CUPTI (skipped elsewhere, with the reason)")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = gpu_missing_reason() if gpu_items else None
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs an NVIDIA GPU with CUPTI: {reason}"))
