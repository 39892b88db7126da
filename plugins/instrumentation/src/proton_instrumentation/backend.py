"""The ``instrumentation`` backend: cycles per intra-kernel scope, from Triton's own proton passes.

The core sees an ordinary :class:`~proton_core.plugin_api.Backend`. ``start`` installs everything in
Triton (:mod:`.installation`), ``stop`` restores it. Per launch the hooks of :mod:`.runtime` queue an
asynchronous copy of the profile buffer (:meth:`InstrumentationBackend.submit`).

Copies are retired oldest first, as they complete, into the collector's pending totals
(:mod:`.collect`), which frees their staging buffers for the next launches:

- at a launch's exit, once :attr:`~InstrumentationBackend.retire_batch` copies are outstanding and the
  newest of those completed (one non-blocking event query), every completed copy from the oldest
  on is decoded in one batch (:mod:`.fastpath` decodes a batch of one kernel at once);
- back-pressure: past :attr:`~InstrumentationBackend.max_copies` outstanding copies or
  :attr:`~InstrumentationBackend.max_bytes` outstanding bytes, the launching thread waits for the
  oldest batch, so memory never grows with the length of a run;
- ``drain`` (the periodic poll) retires what completed, ``flush`` waits for everything.

A copy that has not completed is never read. Launches are tagged with the epoch and the
launching thread's context node when they enter, so a flush routes them as the core routes any
kernel record. Nothing here touches CUPTI or libproton, so a ``cupti`` session can run beside it.

``env_factory``/``device_factory`` are looked up at construction: the CPU tests replace them with
stand-ins for Triton and the GPU.
"""

from __future__ import annotations

import os
import threading
from collections import deque

from proton_core.plugin_api import NODE_CONTEXT, NODE_FRAME, Backend, capture_frames, register_internal_path

from . import buffers, installation, triton_env
from .collect import Collector
from .compiler_hook import ProtonPasses
from .mode import parse_mode
from .registry import REGISTRY
from .runtime import LaunchHooks

register_internal_path(os.path.dirname(os.path.abspath(__file__)) + os.sep)

#: Outstanding copies (queued, not yet decoded) past which a launch waits for the oldest ones.
MAX_OUTSTANDING_COPIES = 1024
#: Outstanding copied bytes past which a launch waits for the oldest ones (the newest copy always stays).
MAX_OUTSTANDING_BYTES = 128 << 20
#: Completed copies are decoded in batches of about this many.
RETIRE_BATCH = 64


class InstrumentationBackend(Backend):
    device_type = "CUDA"
    env_factory = staticmethod(triton_env.load)
    device_factory = buffers.TorchDevice
    max_copies = MAX_OUTSTANDING_COPIES
    max_bytes = MAX_OUTSTANDING_BYTES
    retire_batch = RETIRE_BATCH

    def __init__(self) -> None:
        self.env = type(self).env_factory()
        self.device = type(self).device_factory()
        self.allocator = buffers.ProfileAllocator(self.device)
        self.hooks = LaunchHooks(self)
        self.collector = Collector(self.device)
        self.lock = threading.Lock()
        self.local = threading.local()
        self.epoch = 0
        self.python_frames = False
        self.queue: deque = deque()
        self.queued_bytes = 0
        self.trie: dict[tuple, int] = {}
        self.new_nodes: list = []
        self.launches = 0
        self.retired = 0  #: launches whose copy was decoded
        self.peak_outstanding = 0  #: most copies outstanding at once
        self.mode = None
        self._started = False

    # ------------------------------------------------------------ contract ----
    def start(self, mode) -> None:
        self.mode = parse_mode(mode)  # first: a bad option leaves nothing installed
        props = self.device.properties(self.device.current())
        passes = ProtonPasses(self.mode, props["max_shared_mem"], self.env.proton)
        installation.acquire(self.env, passes, self.allocator, (self._on_load, self.hooks.enter, self.hooks.exit))
        self._started = True
        self.collector.warned = set()

    def stop(self) -> None:
        if self._started:
            self._started = False
            installation.release()
        with self.lock:
            queue, self.queue, self.queued_bytes = self.queue, deque(), 0
            for launch in queue:  # normally none: the core flushes before it stops a backend
                self.device.wait(launch.copy)
                self.device.release(launch.copy)
            self.device.close()

    def configure(self, *, python_frames, trace) -> None:
        self.python_frames = bool(python_frames)
        self.collector.trace = bool(trace)

    def set_epoch(self, epoch) -> None:
        self.epoch = int(epoch)

    def set_context(self, context_id) -> None:
        self.local.ctx = context_id

    def flush(self):
        with self.lock:
            self._retire(len(self.queue))
            return self._take()

    def drain(self):
        with self.lock:
            self._retire(0)
            return self._take()

    def outstanding(self) -> int:
        """Copies queued and not yet decoded."""
        return len(self.queue)

    # ------------------------------------------------------------- hooks ----
    def _on_load(self, module, function, name, metadata_group, hash=None, *rest) -> None:
        REGISTRY.on_load(self.env, module, function, name, metadata_group, hash)

    def node_here(self) -> int:
        """The launching thread's node in our trie (its context id, Python frames before it if asked)."""
        if not self.python_frames:
            found = self.trie.get((0, NODE_CONTEXT, getattr(self.local, "ctx", 0)))
            if found is not None:
                return found
        chain = [(NODE_FRAME, f) for f in capture_frames()] if self.python_frames else []
        chain.append((NODE_CONTEXT, getattr(self.local, "ctx", 0)))
        node = 0
        with self.lock:
            for kind, value in chain:
                key = (node, kind, value)
                found = self.trie.get(key)
                if found is None:
                    found = self.trie[key] = len(self.trie) + 1
                    self.new_nodes.append((found, node, kind, value))
                node = found
        return node

    def submit(self, launch) -> None:
        """Queue the launch's copy back (exit hook), retire completed copies, apply back-pressure."""
        launch.copy = self.device.copy_to_host(launch.buffer, launch.nbytes, launch.stream, launch.device)
        launch.buffer = None  # the scratch buffer is reused by the next launch on the stream, after the copy
        with self.lock:
            self.launches += 1
            launch.launch_id = self.launches
            queue = self.queue
            queue.append(launch)
            self.queued_bytes += launch.nbytes
            n = len(queue)
            if n > self.peak_outstanding:
                self.peak_outstanding = n
            if n > self.max_copies or self.queued_bytes > self.max_bytes:
                self._retire(min(n, self.retire_batch))
                while len(queue) > 1 and self.queued_bytes > self.max_bytes:
                    self._retire(1)
            elif n >= self.retire_batch and self.device.ready(queue[self.retire_batch - 1].copy):
                self._retire(0)

    def _retire(self, block: int) -> None:
        """Decode copies from the oldest on: the first ``block`` waited for, then those that completed
        (stops at the first that has not). Their staging buffers go back to the pool. Lock held."""
        queue, device = self.queue, self.device
        done = []
        while queue:
            launch = queue[0]
            if len(done) < block:
                device.wait(launch.copy)
            elif not device.ready(launch.copy):
                break
            queue.popleft()
            done.append(launch)
        if not done:
            return
        self.queued_bytes -= sum(launch.nbytes for launch in done)
        self.retired += len(done)
        try:
            self.collector.add_many([(launch, device.data(launch.copy)) for launch in done])
        finally:
            for launch in done:
                device.release(launch.copy)
                launch.copy = None

    def note_not_instrumented(self, kernel: str) -> None:
        self.collector.warn_once((kernel, "before"), (
            f"kernel {kernel} was loaded before the instrumentation session started, so its scopes record nothing "
            "(a held CompiledKernel or warmup); launch it through its @triton.jit/@gluon.jit function inside "
            "the session to recompile it with instrumentation"))

    def note_skipped(self, info, kernel: str) -> None:
        with self.lock:
            self.collector.dropped += 1
        why = info.problem if info is not None and info.problem else "it was loaded without our load hook"
        self.collector.warn_once((kernel, "skipped"), f"kernel {kernel}: launches are not decoded ({why}); "
                                 "they are counted in 'dropped'")

    def _take(self):
        """Lock held: the totals since the last flush/drain, with the trie nodes made since."""
        nodes, self.new_nodes = self.new_nodes, []
        return self.collector.take(nodes)
