"""Triton's launch hooks: pair each launch with its slot in the profile arena and commit it.

Per instrumented launch, in this order on the launching thread (DESIGN.md §2): our allocator hands
the launcher a zeroed slot of its thread's arena for the stream (:mod:`.buffers`); the enter hook
takes it, with the kernel's :class:`~.registry.KernelInfo`, the epoch, the calling thread's context
node and the host time; the kernel runs; the exit hook commits the launch to the arena's next batch
(the backend's ``submit``). Nothing is done on the device per launch: a whole batch of launches is
copied back at once when its arena fills, after ``max_batch`` launches, or at drain/flush. No launch
waits for the device unless more batches are outstanding than the backend's bound.

A launch with no buffer whose kernel our load hook never saw was loaded before the session started
(a held ``CompiledKernel``, a warmup): its scopes record nothing, and we say so once per kernel.

This is the launch path: no logging, no per-launch dicts, one small object per launch.
"""

from __future__ import annotations

import threading
import time

from .buffers import CAPTURED
from .registry import REGISTRY, KernelInfo


class Launch:
    """One instrumented launch, from its enter hook until its copy was decoded."""

    __slots__ = ("info", "epoch", "node", "device", "arena", "nbytes", "stream", "launch_ns", "offset", "launch_id")

    def __init__(self, info: KernelInfo, epoch: int, node: int, device: int, arena, nbytes: int, stream,
                 launch_ns: int, offset: int = 0) -> None:
        self.info, self.epoch, self.node, self.device = info, epoch, node, device
        self.arena, self.nbytes, self.stream, self.launch_ns = arena, nbytes, stream, launch_ns
        self.offset = offset  # of its slot in the arena
        self.launch_id = 0


def _launch_data(meta) -> dict:
    """The LazyDict's plain part (name, function, stream) without running launch_metadata."""
    data = getattr(meta, "data", meta)
    return data if isinstance(data, dict) else {}


class LaunchHooks:
    """The enter/exit callables added to ``knobs.runtime.launch_enter_hook``/``launch_exit_hook``."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.local = threading.local()
        self.kernels = REGISTRY.kernels
        self.take = backend.allocator.take  # (arena, offset, nbytes) the allocator left for this launch

    def enter(self, meta) -> None:
        backend = self.backend
        pending = self.take()
        self.local.launch = None  # a launch that failed before its exit hook is not submitted by the next one
        data = _launch_data(meta)
        function = data.get("function")
        info = self.kernels.get(function)
        if pending is CAPTURED:
            if backend.epoch:
                backend.note_captured(data.get("name") or "?")
            return
        if pending is None:
            if backend.epoch and info is None and function:
                backend.note_not_instrumented(data.get("name") or "?")
            return
        epoch = backend.epoch
        if not epoch:
            return  # no session listens: the kernel still needs its slot, nobody reads it
        if info is None or not info.instrumented:
            backend.note_skipped(info, data.get("name") or "?")
            return
        arena, offset, nbytes = pending
        self.local.launch = Launch(info, epoch, backend.node_here(), arena.device, arena, nbytes, arena.stream,
                                   time.monotonic_ns(), offset)

    def exit(self, meta) -> None:
        local = self.local
        launch = local.__dict__.get("launch")
        if launch is None:
            return
        local.launch = None
        self.backend.submit(launch)
