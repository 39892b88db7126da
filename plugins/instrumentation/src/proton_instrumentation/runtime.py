"""Triton's launch hooks: pair each launch with its profile buffer and queue the copy back.

Per instrumented launch, in this order on the launching thread (DESIGN.md §2): our allocator hands
the launcher a zeroed buffer; the enter hook takes it, with the kernel's :class:`~.registry.KernelInfo`,
the epoch, the calling thread's context node and the host time; the kernel runs; the exit hook
queues an asynchronous device-to-host copy on the launch's stream plus an event. The buffer is read
only at flush/drain, when its event completed: no launch waits for the device.

A launch with no buffer whose kernel our load hook never saw was loaded before the session started
(a held ``CompiledKernel``, a warmup): its scopes record nothing, and we say so once per kernel.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .buffers import Pending
from .registry import REGISTRY, KernelInfo


@dataclass
class Launch:
    info: KernelInfo
    epoch: int
    node: int
    device: int
    pending: Pending
    launch_ns: int
    launch_id: int = 0
    copy: object = None

    @property
    def nbytes(self) -> int:
        return self.pending.nbytes


def _launch_data(meta) -> dict:
    """The LazyDict's plain part (name, function, stream) without running launch_metadata."""
    data = getattr(meta, "data", meta)
    return data if isinstance(data, dict) else {}


class LaunchHooks:
    """The enter/exit callables added to ``knobs.runtime.launch_enter_hook``/``launch_exit_hook``."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.local = threading.local()

    def enter(self, meta) -> None:
        backend = self.backend
        pending = backend.allocator.take()
        data = _launch_data(meta)
        function = data.get("function")
        info = REGISTRY.get(function)
        if pending is None:
            if backend.epoch and info is None and function:
                backend.note_not_instrumented(data.get("name") or "?")
            return
        if not backend.epoch:
            return  # no session listens: the kernel still needs its buffer, nobody reads it
        if info is None or not info.instrumented:
            backend.note_skipped(info, data.get("name") or "?")
            return
        self.local.launch = Launch(info, backend.epoch, backend.node_here(), backend.device.current(), pending,
                                   time.monotonic_ns())

    def exit(self, meta) -> None:
        launch = getattr(self.local, "launch", None)
        if launch is None:
            return
        self.local.launch = None
        self.backend.submit(launch)
