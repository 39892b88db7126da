"""The ``instrumentation`` backend: cycles per intra-kernel scope, from Triton's own proton passes.

The core sees an ordinary :class:`~proton_core.plugin_api.Backend`. ``start`` installs everything in
Triton (:mod:`.installation`), ``stop`` restores it. Per launch the hooks of :mod:`.runtime` take a
slot of the launching thread's device arena and commit the launch to the arena's next batch
(:meth:`InstrumentationBackend.submit`); nothing is done on the device per launch. A batch (all the
launches of an arena since its last batch) goes back in one copy, one event and one memset
(:mod:`.buffers`) when the arena is full, after ``max_batch`` launches, or at drain/flush.

Batches are retired oldest first, as their copies complete, into the collector's pending totals
(:mod:`.collect`), which frees their staging buffers:

- whenever a launching thread issues a batch, every batch whose copy completed (non-blocking event
  queries) is decoded; :mod:`.fastpath` decodes the launches of one kernel in a batch at once;
- back-pressure: past :attr:`~InstrumentationBackend.max_batches` queued batches or
  :attr:`~InstrumentationBackend.max_bytes` queued bytes, the issuing thread waits for the oldest,
  so memory never grows with the length of a run;
- ``drain`` (the periodic poll) issues every arena's committed launches, so the next poll sees them,
  and retires what completed; ``flush`` issues and waits for everything.

A copy that has not completed is never read. Launches are tagged with the epoch and the
launching thread's context node when they enter, so a flush routes them as the core routes any
kernel record. Nothing here touches CUPTI or libproton, so a ``cupti`` session can run beside it.

``env_factory``/``device_factory`` are looked up at construction: the CPU tests replace them with
stand-ins for Triton and the GPU.
"""

from __future__ import annotations

import os
import threading

from proton_core.plugin_api import NODE_CONTEXT, NODE_FRAME, Backend, capture_frames, register_internal_path, warn

from . import buffers, installation, triton_env
from .collect import Collector
from .compiler_hook import ProtonPasses
from .mode import parse_mode
from .registry import REGISTRY
from .runtime import LaunchHooks

register_internal_path(os.path.dirname(os.path.abspath(__file__)) + os.sep)

#: Issued batches (copied back or on the way, not yet decoded) past which the issuing thread waits.
MAX_QUEUED_BATCHES = 32
#: Queued batch bytes past which the issuing thread waits for the oldest (the newest batch always stays).
MAX_OUTSTANDING_BYTES = 128 << 20


class InstrumentationBackend(Backend):
    device_type = "CUDA"
    env_factory = staticmethod(triton_env.load)
    device_factory = buffers.TorchDevice
    max_batches = MAX_QUEUED_BATCHES
    max_bytes = MAX_OUTSTANDING_BYTES

    def __init__(self) -> None:
        self.env = type(self).env_factory()
        self.device = type(self).device_factory()
        self.allocator = buffers.ProfileAllocator(self.device)
        self.allocator.on_issue = self._after_issue
        self.hooks = LaunchHooks(self)
        self.collector = Collector(self.device)
        self.lock = threading.Lock()
        self.local = threading.local()
        self.epoch = 0
        self.python_frames = False
        self.trie: dict[tuple, int] = {}
        self.new_nodes: list = []
        self.retired = 0  #: launches decoded so far
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
            batches, stranded = self.allocator.close()
            for batch in batches:  # normally none: the core flushes before it stops a backend
                self.device.wait(batch.copy)
                self.device.release(batch.copy)
            self.device.close()
        if stranded:
            warn(f"instrumentation: {stranded} launch(es) were not read back: their stream was being captured "
                 "into a CUDA graph when the session ended (end the capture before finalize)")

    def configure(self, *, python_frames, trace) -> None:
        self.python_frames = bool(python_frames)  # (a thread's cached node is used only while this is off)
        self.collector.trace = bool(trace)

    def set_epoch(self, epoch) -> None:
        self.epoch = int(epoch)

    def set_context(self, context_id) -> None:
        local = self.local
        local.ctx = context_id
        local.node = 0  # node_here looks it up again at the next launch

    def flush(self):
        allocator = self.allocator
        allocator.issue_all()
        with self.lock:
            self._retire(len(allocator.batches))
            return self._take()

    def drain(self):
        self.allocator.issue_all()  # copied now, decoded by the next poll (or flush) once complete
        with self.lock:
            self._retire(0)
            return self._take()

    def outstanding(self) -> int:
        """Launches committed and not yet decoded (in arenas and in queued batches)."""
        return self.allocator.pending_launches()

    @property
    def launches(self) -> int:
        """Launches committed so far."""
        return self.allocator.committed

    @property
    def max_outstanding(self) -> int:
        """The most launches outstanding from one launching thread: its arena's batch and the queue."""
        return (self.max_batches + 2) * self.allocator.max_batch

    # ------------------------------------------------------------- hooks ----
    def _on_load(self, module, function, name, metadata_group, hash=None, *rest) -> None:
        REGISTRY.on_load(self.env, module, function, name, metadata_group, hash)

    def node_here(self) -> int:
        """The launching thread's node in our trie (its context id, Python frames before it if asked)."""
        if not self.python_frames:
            local = self.local
            node = local.__dict__.get("node")
            if node:  # the same context as this thread's last launch
                return node
            found = self.trie.get((0, NODE_CONTEXT, getattr(local, "ctx", 0)))
            if found is not None:
                local.node = found
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
        if not self.python_frames:
            self.local.node = node
        return node

    def submit(self, launch) -> None:
        """The launch's exit hook: commit it to its arena's batch (issued when full)."""
        if self.allocator.commit(launch):
            self._after_issue()

    def _after_issue(self) -> None:
        """A launching thread just issued a batch: retire what completed, apply back-pressure."""
        allocator = self.allocator
        with self.lock:
            self._retire(0)
            batches = allocator.batches
            while len(batches) > 1 and (len(batches) > self.max_batches or allocator.batch_bytes > self.max_bytes):
                self._retire(1)

    def _retire(self, block: int) -> None:
        """Decode batches from the oldest on: the first ``block`` waited for, then those whose copy
        completed (stops at the first that has not). Their staging buffers go back to the pool. Lock held."""
        allocator, device = self.allocator, self.device
        done = []
        while True:
            must = len(done) < block
            batch = allocator.oldest(must)
            if batch is None:
                break
            if must:
                device.wait(batch.copy)
            done.append(batch)
        if not done:
            return
        try:
            for batch in done:
                self.retired += len(batch.launches)
                self.collector.add_batch(device.data(batch.copy), batch.start, batch.launches)
        finally:
            for batch in done:
                device.release(batch.copy)

    def note_not_instrumented(self, kernel: str) -> None:
        self.collector.warn_once((kernel, "before"), (
            f"kernel {kernel} was loaded before the instrumentation session started, so its scopes record nothing "
            "(a held CompiledKernel or warmup); launch it through its @triton.jit/@gluon.jit function inside "
            "the session to recompile it with instrumentation"))

    def note_captured(self, kernel: str) -> None:
        self.collector.warn_once((kernel, "graph"), (
            f"kernel {kernel} was launched during CUDA graph capture: the instrumentation backend reads back "
            "eager launches only, so the graph's replays of it are not in the profile (launch it outside the "
            "graph to see its scopes)"))

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
