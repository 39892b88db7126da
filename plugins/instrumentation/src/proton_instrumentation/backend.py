"""The ``instrumentation`` backend: cycles per intra-kernel scope, from Triton's own proton passes.

The core sees an ordinary :class:`~proton_core.plugin_api.Backend`. ``start`` installs everything in
Triton (:mod:`.installation`), ``stop`` restores it. Per launch the hooks of :mod:`.runtime` queue an
asynchronous copy of the profile buffer; ``drain`` decodes the copies whose event completed,
``flush`` waits for the rest first (:mod:`.collect`). Launches are tagged with the epoch and the
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

#: Copied-back bytes waiting for a flush before the launching thread decodes the oldest itself.
MAX_QUEUED_BYTES = 256 << 20


class InstrumentationBackend(Backend):
    device_type = "CUDA"
    env_factory = staticmethod(triton_env.load)
    device_factory = buffers.TorchDevice

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
            self.queue.clear()
            self.queued_bytes = 0

    def configure(self, *, python_frames, trace) -> None:
        self.python_frames = bool(python_frames)
        self.collector.trace = bool(trace)

    def set_epoch(self, epoch) -> None:
        self.epoch = int(epoch)

    def set_context(self, context_id) -> None:
        self.local.ctx = context_id

    def flush(self):
        with self.lock:
            launches, self.queue, self.queued_bytes = list(self.queue), deque(), 0
        for launch in launches:
            self.device.wait(launch.copy)
        return self._batch(launches)

    def drain(self):
        with self.lock:
            ready = [l for l in self.queue if self.device.ready(l.copy)]
            for launch in ready:
                self.queue.remove(launch)
                self.queued_bytes -= launch.nbytes
        return self._batch(ready)

    # ------------------------------------------------------------- hooks ----
    def _on_load(self, module, function, name, metadata_group, hash=None, *rest) -> None:
        REGISTRY.on_load(self.env, module, function, name, metadata_group, hash)

    def node_here(self) -> int:
        """The launching thread's node in our trie (its context id, Python frames before it if asked)."""
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
        """Queue the launch's copy back (exit hook); past :data:`MAX_QUEUED_BYTES` decode the oldest now."""
        launch.copy = self.device.copy_to_host(launch.pending.buffer, launch.nbytes, launch.pending.stream)
        launch.pending.buffer = None  # the copy keeps it alive until it completed
        with self.lock:
            self.launches += 1
            launch.launch_id = self.launches
            self.queue.append(launch)
            self.queued_bytes += launch.nbytes
            if self.queued_bytes <= MAX_QUEUED_BYTES:
                return
            oldest = self.queue.popleft()
            self.queued_bytes -= oldest.nbytes
            self.device.wait(oldest.copy)
            self.collector.add(oldest, self.device.data(oldest.copy))

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

    def _batch(self, launches):
        with self.lock:
            for launch in launches:
                self.collector.add(launch, self.device.data(launch.copy))
            nodes, self.new_nodes = self.new_nodes, []
            return self.collector.take(nodes)

