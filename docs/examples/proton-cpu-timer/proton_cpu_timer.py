"""An example third-party backend: blocks of host code timed as if they were GPU kernels.

    import proton_core as proton
    from proton_cpu_timer import kernel

    proton.start("run", backend="cpu_timer")
    with proton.scope("step"):
        with kernel("tokenize"):              # or @kernel("tokenize") on a function
            ...
    proton.finalize()                         # run.hatchet: step/tokenize with time (ns) and count

Each ``kernel`` block is one "launch", filed under the scopes open on the calling thread as a GPU
kernel is.  Per launch the backend does, in Python, what a GPU backend does natively: read the
thread's context id, intern the call path in a trie, aggregate by (epoch, node, kernel, device)
and, when tracing, keep one event per kernel.  Python per launch is acceptable here only because
the "kernels" are Python themselves.  Written against the public contract alone:
``proton_core.plugin_api`` and ``proton_core.hookimpl``.
"""

from __future__ import annotations

import functools
import threading
import time

from proton_core import hookimpl
from proton_core.plugin_api import NODE_CONTEXT, NODE_FRAME, Backend, Batch, capture_frames, register_internal_path

register_internal_path(__file__)  # this file's frames never show in python-context paths

_RUNNING: list[CpuTimerBackend] = []  # started backends: where kernel() delivers its launches


class CpuTimerBackend(Backend):
    device_type = "CPU"

    def __init__(self) -> None:
        self.local = threading.local()  # .context: the calling thread's context id (set_context)
        self.lock = threading.Lock()
        self.epoch = 0  # 0: no session listens
        self.python_frames = self.trace = False
        self.trie: dict[tuple, int] = {}  # (parent node, kind, value) -> node id; kept across flushes
        self.new_nodes: list[tuple] = []  # (node, parent, kind, value) not delivered yet
        self.records: dict[tuple, list[int]] = {}  # (epoch, node, kernel, device) -> [time ns, count]
        self.events: list[tuple] = []  # one per kernel while tracing

    # -------------------------------------------------- what the core calls ----
    def start(self, mode: str | None) -> None:
        _RUNNING.append(self)

    def stop(self) -> None:
        if self in _RUNNING:
            _RUNNING.remove(self)

    def configure(self, *, python_frames: bool, trace: bool) -> None:
        self.python_frames, self.trace = python_frames, trace

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def set_context(self, context_id: int) -> None:  # on every scope enter and exit, on that thread
        self.local.context = context_id

    def flush(self) -> Batch:
        with self.lock:
            records = [(*key, time_ns, count) for key, (time_ns, count) in self.records.items()]
            batch = Batch(nodes=self.new_nodes, records=records, events=self.events, device_type=self.device_type)
            self.new_nodes, self.records, self.events = [], {}, []
        return batch

    # ---------------------------------------------------------- one launch ----
    def launch(self, kernel: str, start_ns: int, end_ns: int, device: int = 0) -> None:
        """Kernel ``kernel`` ran from ``start_ns`` to ``end_ns`` (``time.monotonic_ns()``), launched here."""
        epoch = self.epoch
        if epoch == 0:
            return
        chain = [(NODE_FRAME, frame) for frame in capture_frames()] if self.python_frames else []
        chain.append((NODE_CONTEXT, getattr(self.local, "context", 0)))
        with self.lock:
            node = 0
            for kind, value in chain:
                node = self._intern(node, kind, value)
            totals = self.records.setdefault((epoch, node, kernel, device), [0, 0])
            totals[0] += end_ns - start_ns
            totals[1] += 1
            if self.trace:  # stream 0; launched when it started
                self.events.append((epoch, node, kernel, device, 0, start_ns, end_ns, start_ns,
                                    threading.get_native_id()))

    def _intern(self, parent: int, kind: int, value: object) -> int:
        node = self.trie.get((parent, kind, value))
        if node is None:
            node = self.trie[(parent, kind, value)] = len(self.trie) + 1
            self.new_nodes.append((node, parent, kind, value))
        return node


class kernel:
    """``with kernel("name"):`` or ``@kernel("name")``: each block or call is one launch of ``name``."""

    def __init__(self, name: str, device: int = 0) -> None:
        self.name, self.device, self.starts = name, device, []

    def __enter__(self) -> kernel:
        self.starts.append(time.monotonic_ns())
        return self

    def __exit__(self, *exc: object) -> None:
        _launch(self.name, self.starts.pop(), time.monotonic_ns(), self.device)

    def __call__(self, func):
        @functools.wraps(func)
        def timed(*args, **kwargs):
            start = time.monotonic_ns()
            try:
                return func(*args, **kwargs)
            finally:
                _launch(self.name, start, time.monotonic_ns(), self.device)

        return timed


def _launch(name: str, start_ns: int, end_ns: int, device: int) -> None:
    for backend in list(_RUNNING):
        backend.launch(name, start_ns, end_ns, device)


@hookimpl
def proton_register_backends(register) -> None:
    # priority 0: automatic choice never picks it (it sees no GPU); users name it: start(backend="cpu_timer")
    register("cpu_timer", CpuTimerBackend, priority=0,
             description="blocks of host code marked with proton_cpu_timer.kernel, timed as kernels")
