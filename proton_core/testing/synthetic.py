"""The synthetic backend: the backend contract in pure Python, fed by explicit launches."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from .. import graph_metrics
from ..backend import NODE_CAPTURED_AT, NODE_CONTEXT, NODE_FRAME, Backend, Batch
from ..context import capture_frames, register_internal_path
from ..plugins import hookimpl
from .contract import Driver

register_internal_path(__file__)

DEVICE = {"arch": "90", "num_sms": 132, "clock_rate": 1980000, "memory_clock_rate": 3201000, "bus_width": 6144}
DEVICES = {"CUDA": {"0": dict(DEVICE), "1": dict(DEVICE)}}


class SyntheticBackend(Backend):
    """Feeds synthetic kernel records through the backend contract.

    Per launch it does what a native backend does: read the thread's context
    id, optionally walk Python frames, intern the chain in a trie, and
    aggregate by (epoch, node, kernel, device).  Graph capture and replay
    re-root the captured chains under ``<captured_at>``; :meth:`capturing` captures
    the launches of a block as torch's ``CUDAGraph`` does, telling
    :mod:`~proton_core.graph_metrics` as the torch observer would, and
    :meth:`replay` tells it of each replay.  Metrics measured
    inside kernels (``launch(..., inner=...)``, :meth:`sample`) are summed per
    (epoch, node, kernel, device, sub_path) as they come, never kept raw, and
    delivered as ``Batch.kernel_metrics``.
    """

    device_type = "CUDA"
    instance = None

    def __init__(self) -> None:
        SyntheticBackend.instance = self
        self.local = threading.local()
        self.main_ctx = 0  # the main thread's context as last set: threads that never set theirs launch under it
        self.lock = threading.Lock()
        self.trie: dict[tuple, int] = {}
        self.new_nodes: list = []
        self.records: dict[tuple, list] = {}
        #: (epoch, node, kernel, device, sub_path) -> {metric name: summed value (a property: the last)}
        self.kernel_metrics: dict[tuple, dict] = {}
        self.events: list = []
        self.kernel_slices: list = []  # Batch.kernel_slices, while tracing
        self.launch_ids = 0
        self.epoch = 0
        self.switch = None  # switch_epochs: [every, launches left, last epoch]
        self.python_frames = False
        self.trace = False
        self.started = 0
        self.stopped = 0
        self.dropped = 0
        self.unobserved_ns = 0  # handed over with the next flush, as a re-attaching backend would
        self.untimed = 0  # kernels of the next flush to report as delivered without a duration
        self.phase_end_threads: list[int] = []  # thread ids that ended a phase (phase_ended calls)

    # ------------------------------------------------------------ contract ----
    def start(self, mode):
        self.started += 1

    def stop(self):
        self.stopped += 1

    def configure(self, *, python_frames, trace):
        self.python_frames, self.trace = python_frames, trace

    def set_epoch(self, epoch):
        with self.lock:
            self.epoch = epoch
            self.switch = None

    def switch_epochs(self, every, last):
        with self.lock:
            self.switch = [every, every, last] if last > self.epoch else None  # [every, left, last]
        return True

    def current_epoch(self):
        return self.epoch

    def _count_for_switch(self):
        """As the cupti recorder: the launch that makes the count stays in its epoch (lock held)."""
        switch = self.switch
        switch[1] -= 1
        if switch[1] == 0:
            if self.epoch + 1 > switch[2]:
                self.switch = None
            else:
                self.epoch += 1
                switch[1] = switch[0]

    def set_context(self, context_id):
        self.local.ctx = context_id
        if threading.current_thread() is threading.main_thread():
            self.main_ctx = context_id

    def flush(self):
        with self.lock:
            records = [(*k, v[0], v[1]) for k, v in self.records.items()]
            inner = [(*k, tuple(v.items())) for k, v in self.kernel_metrics.items()]
            batch = Batch(nodes=self.new_nodes, records=records, events=self.events, dropped=self.dropped,
                          devices=DEVICES, device_type="CUDA", unobserved_ns=self.unobserved_ns, untimed=self.untimed,
                          kernel_metrics=inner, kernel_slices=self.kernel_slices)
            self.new_nodes, self.records, self.events, self.dropped = [], {}, [], 0
            self.kernel_slices = []
            self.kernel_metrics = {}
            self.unobserved_ns = self.untimed = 0
        return batch

    def phase_ended(self):
        self.phase_end_threads.append(threading.get_ident())

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
        chain.append((NODE_CONTEXT, getattr(self.local, "ctx", self.main_ctx)))  # never set: the main thread's
        return chain

    def _node(self, chain):
        node = 0
        for kind, value in chain:
            node = self._intern(node, kind, value)
        return node

    def _add_inner(self, epoch, node, kernel, device, inner):
        """Sum ``[(sub_path, metrics)]`` into the per-key totals (lock held); metrics a dict or pairs."""
        for sub_path, metrics in inner:
            totals = self.kernel_metrics.setdefault((epoch, node, kernel, device, tuple(sub_path)), {})
            for name, value in (metrics.items() if isinstance(metrics, dict) else metrics):
                if isinstance(name, str) and name.rstrip().endswith("(pty)"):
                    totals[name] = value
                else:
                    totals[name] = totals.get(name, 0) + value

    def _record(self, epoch, chain, kernel, duration_ns, device, stream, launch_ns, inner=None, slices=None):
        with self.lock:
            if self.switch is not None and epoch == self.epoch:
                self._count_for_switch()
            node = self._node(chain)
            stats = self.records.setdefault((epoch, node, kernel, device), [0, 0])
            stats[0] += duration_ns
            stats[1] += 1
            if inner:
                self._add_inner(epoch, node, kernel, device, inner)
            if self.trace:
                start = time.monotonic_ns()
                self.events.append((epoch, node, kernel, device, stream, start, start + duration_ns, launch_ns,
                                    threading.get_native_id()))
                if slices:
                    self.launch_ids += 1
                    self.kernel_slices += [(epoch, node, kernel, device, self.launch_ids, track, name, start + s,
                                            start + e) for track, name, s, e in slices]

    def launch(self, kernel, duration_ns=1000, device=0, stream=7, inner=None, slices=None):
        """One kernel launch from the calling thread.

        ``inner``: what was measured inside this launch, ``[(sub_path, metrics), ...]`` with
        ``sub_path`` a tuple of names below the kernel's node (``()``: the kernel node) and
        ``metrics`` a dict or pairs of metric name -> number, e.g.
        ``inner=[(("/src/k.py:42",), {"samples": 3, "stall_wait": 2})]``.
        ``slices``: time slices inside this launch, ``[(track, name, start_ns, end_ns)]`` relative to the
        kernel's start, delivered as ``Batch.kernel_slices`` while tracing.
        While this thread captures (:meth:`capturing`), the launch goes into the graph instead: recorded at
        each replay, under where it was captured (or, captured while nobody recorded, without that path).
        """
        graph = getattr(self.local, "graph", None)
        if graph is not None:
            graph.append((kernel, duration_ns, self._chain() if self.epoch else None))
            return
        if self.epoch == 0:
            return
        self._record(self.epoch, self._chain(), kernel, duration_ns, device, stream, time.monotonic_ns(), inner,
                     slices)

    def sample(self, kernel, inner, device=0):
        """In-kernel metrics of ``kernel`` at the calling thread's context with no kernel record, as a
        sampling backend delivers them (``inner`` as for :meth:`launch`); summed, never kept raw."""
        if self.epoch == 0:
            return
        chain = self._chain()
        with self.lock:
            self._add_inner(self.epoch, self._node(chain), kernel, device, inner)

    def capture(self, kernels):
        """Capture a graph of ``[(kernel, duration_ns)]`` at the current path."""
        chain = self._chain() if self.epoch else None
        return SyntheticGraph((k, d, chain) for k, d in kernels)

    def begin_capture(self) -> "SyntheticGraph":
        """Start capturing this thread's launches into a new graph (``torch.cuda.CUDAGraph.capture_begin``)."""
        graph = self.local.graph = SyntheticGraph()
        graph_metrics.capture_began(graph)
        return graph

    def end_capture(self) -> "SyntheticGraph":
        """Stop capturing on this thread; returns the graph (``capture_end``)."""
        graph, self.local.graph = self.local.graph, None
        graph_metrics.capture_ended(graph)
        return graph

    @contextmanager
    def capturing(self):
        """``with fake.backend.capturing() as graph:`` captures the block's launches (``torch.cuda.graph``)."""
        graph = self.begin_capture()
        try:
            yield graph
        finally:
            self.end_capture()

    def replay(self, graph, device=0):
        """Launch ``graph`` from this thread (``CUDAGraph.replay``): its kernels under this path and
        ``<captured_at>``, then :func:`graph_metrics.replayed`, as the torch observer calls it."""
        if self.epoch != 0:
            launch_chain = self._chain()
            for kernel, duration, captured in graph:
                chain = launch_chain + ([(NODE_CAPTURED_AT, None)] + captured if captured else [])
                self._record(self.epoch, chain, kernel, duration, device, 7, time.monotonic_ns())
        graph_metrics.replayed(graph)


class SyntheticGraph(list):
    """A captured graph: ``[(kernel, duration_ns, capture chain or None)]`` (a list that can be weakly referenced)."""


class SyntheticPlugin:
    """The plugin object registering :class:`SyntheticBackend` as ``fake``."""

    @staticmethod
    @hookimpl
    def proton_register_backends(register):
        register("fake", SyntheticBackend, priority=-1, modes=("fastmode",),
                 description="synthetic records for tests (proton_core.testing)")


class SyntheticDriver(Driver):
    """Drives a :class:`SyntheticBackend` for :class:`~proton_core.testing.contract.BackendContract`."""

    def __init__(self) -> None:
        self.backend = SyntheticBackend()

    def launch(self, kernel: str, duration_ns: int = 1000, device: int = 0) -> None:
        self.backend.launch(kernel, duration_ns, device)
