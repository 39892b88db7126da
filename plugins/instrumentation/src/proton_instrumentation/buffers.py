"""Profile buffers: Triton's profile allocator over per-stream device arenas, batched copies back.

Triton's launcher asks ``_allocation._profile_allocator(grid * num_ctas * profile_scratch_size,
align, stream)`` for an instrumented kernel, in Python, right before the C launcher calls the launch
enter hook (DESIGN.md §2). :class:`ProfileAllocator` is that callable. Nothing is done on the device
per launch:

- **arena**: one zeroed device region per (thread, device, stream), :data:`ARENA_BYTES` by default,
  grown (to a power of two) when one launch needs more. Each launch's slot is bump-allocated from it
  (aligned as Triton asks) and returned as a plain integer address, which Triton's launcher passes on
  as is. The slot is zero because the region was zeroed since it was last used, so a CTA that never
  ran still shows no preamble.
- **batch**: the committed part of an arena (slots whose launch passed its exit hook) goes back in
  ONE asynchronous copy into a pooled pinned staging buffer, ONE event, then ONE memset of that
  region, all on the arena's stream: kernels -> copy -> memset -> later kernels, so a region is
  reused only after it was copied and zeroed, without any host wait. A batch is issued when the arena
  is full (by the allocation that does not fit, before its kernel), after :attr:`max_batch` launches
  (at the exit hook), and by ``issue_all`` (the backend's drain/flush, from any thread).
- **in-flight slots**: an arena is owned by one thread, so at most one of its slots is between
  allocation and exit hook. ``issue_all`` from another thread copies and zeroes only up to the last
  committed slot and leaves that one (and the rest of the arena) for a later batch; a slot whose
  launch never reached its exit hook (the launch failed) is committed by the owner's next allocation.
- **host staging**: :class:`StagingPool`, pinned buffers in power-of-two size classes. A batch takes
  one; the backend returns it (``release``) once the copy completed and was decoded. Events are
  recycled with it.

``lock`` guards the arenas and the batch queue (short critical sections, no decoding, no waiting).

The device work goes through a small interface (:class:`TorchDevice` on a GPU; the CPU tests pass a
fake with the same methods): ``current()``, ``arena(nbytes, stream, device) -> (handle, address)``
(zeroed, ordered on ``stream``), ``copy_region(handle, start, nbytes, stream, device) -> copy``,
``zero_region(handle, start, nbytes, stream, device)``, ``ready(copy)``, ``wait(copy)``,
``data(copy)``, ``release(copy)``, ``close()``, ``properties(device)``, and for CUDA graphs
``capturing_now()`` (the launching thread's current stream is being captured: once per launch),
``capturing(stream)`` (once per batch) and ``graph_slot(nbytes, stream, device) -> (handle, address)``.

**CUDA graphs.** A launch captured into a graph gets a buffer of its own, kept until the session
ends and never part of an arena: each replay of the graph writes there, so an arena slot would be
overwritten under later launches. Its records are never read (replays are not seen by any hook), and
the backend says so once per kernel. An arena whose stream is being captured is not issued until the
capture ended: a copy queued then would become part of the graph.
"""

from __future__ import annotations

import threading
from collections import deque

from .cuda_driver import CudaDriver

#: Smallest host staging class (bytes); classes are powers of two from here.
MIN_STAGING = 4096
#: Device arena per (thread, device, stream): launches share one copy back per this many bytes.
ARENA_BYTES = 4 << 20
#: Launches per batch at most (also issued earlier when the arena is full).
MAX_BATCH_LAUNCHES = 512
#: Arenas kept; past this the idle ones are issued and dropped.
MAX_ARENAS = 64


#: What ``take()`` returns for a launch captured into a CUDA graph (its slot is its own, never read).
CAPTURED = ("captured",)


def size_class(nbytes: int) -> int:
    """The power of two (at least :data:`MIN_STAGING`) a buffer of ``nbytes`` is taken from."""
    return max(MIN_STAGING, 1 << (max(int(nbytes), 1) - 1).bit_length())


class Arena:
    """One thread's device region on one (device, stream): ``[start, committed)`` holds committed
    launches not yet issued, ``[committed, bump)`` at most one slot in flight, ``[bump, capacity)``
    zeroed and free. Everything before ``start`` was issued (copied and zeroed on the stream)."""

    __slots__ = ("thread", "device", "stream", "handle", "base", "capacity", "start", "bump", "committed",
                 "launches", "closed")

    def __init__(self, thread, device, stream, handle, base, capacity) -> None:
        self.thread, self.device, self.stream = thread, device, stream
        self.handle, self.base, self.capacity = handle, base, capacity
        self.start = self.bump = self.committed = 0
        self.launches: list = []
        self.closed = False


class HostBatch:
    """One issued batch: its copy (staging + event), the arena offset it starts at, its launches."""

    __slots__ = ("copy", "start", "nbytes", "launches")

    def __init__(self, copy, start, nbytes, launches) -> None:
        self.copy, self.start, self.nbytes, self.launches = copy, start, nbytes, launches


class ProfileAllocator:
    """What ``set_profile_allocator`` gets while our sessions run; also owns the arenas and the queue
    of issued batches (oldest first) that the backend retires."""

    owner = "proton-plugin"
    arena_bytes = ARENA_BYTES
    max_batch = MAX_BATCH_LAUNCHES
    max_arenas = MAX_ARENAS

    def __init__(self, device) -> None:
        self.device = device
        self.current = device.current
        self.local = threading.local()
        self.lock = threading.Lock()
        self.arenas: dict[tuple, Arena] = {}
        self.batches: deque = deque()  #: issued, not yet retired (HostBatch), oldest first
        self.batch_bytes = 0  #: bytes of those batches
        self.batch_launches = 0  #: launches in those batches
        self.committed = 0  #: launches committed so far (their ids)
        self.issued = 0  #: batches issued so far
        self.peak_batches = 0  #: most batches queued at once
        self.arenas_made = 0
        self.capturing_now = device.capturing_now
        self.graph_slots: list = []  #: buffers of launches captured into CUDA graphs (kept until close)

    # ------------------------------------------------------- launch path ----
    def __call__(self, size: int, alignment: int, stream):
        """A slot of ``size`` bytes in this thread's arena for (current device, ``stream``): its address.
        Leaves ``(arena, offset, size)`` for the enter hook of this thread. Calls ``on_issue`` (outside
        the lock) when making room issued a batch."""
        dev = self.current()
        local = self.local
        if self.capturing_now():
            local.pending = CAPTURED
            return self._graph_slot(size, alignment, stream, dev)
        arena = local.__dict__.get("arena")
        issued = False
        with self.lock:
            if arena is None or arena.closed or arena.stream != stream or arena.device != dev:
                arena = local.arena = self._find(stream, dev)
            bump = arena.bump
            arena.committed = bump  # normally equal; else the previous launch failed before its exit hook
            base = arena.base
            off = -(-(base + bump) // alignment) * alignment - base if alignment > 1 else bump
            end = off + size
            if end > arena.capacity:
                issued = self._issue(arena)  # the owner has nothing in flight: this empties the arena
                off = -base % alignment if alignment > 1 else 0  # 0 but for a base less aligned than asked
                if off + size > arena.capacity:
                    self._grow(arena, size + (alignment if off else 0))
                    off = -arena.base % alignment if alignment > 1 else 0
                end = off + size
            arena.bump = end
        local.pending = (arena, off, size)
        if issued:
            self.on_issue()
        return arena.base + off

    def _graph_slot(self, size: int, alignment: int, stream, dev) -> int:
        """A slot for a launch captured into a CUDA graph: its own device buffer, held until the session
        ends and never reused by an arena (every replay writes there); its records are never read."""
        handle, address = self.device.graph_slot(size + alignment, stream, dev)
        with self.lock:
            self.graph_slots.append(handle)
        return address + (-address % alignment if alignment > 1 else 0)

    def take(self):
        """``(arena, offset, nbytes)`` of the launch now entering on this thread (None: the kernel is
        not instrumented; :data:`CAPTURED`: the launch is being captured into a CUDA graph)."""
        local = self.local
        pending = local.__dict__.get("pending")
        local.pending = None
        return pending

    def commit(self, launch) -> bool:
        """The launch passed its exit hook (its kernel is on the stream): it joins its arena's next
        batch and gets its id. True: that filled the batch and it was issued (call ``on_issue``)."""
        with self.lock:
            self.committed += 1
            launch.launch_id = self.committed
            arena = launch.arena
            if arena.closed:  # the session stopped while it was in flight
                return False
            end = launch.offset + launch.nbytes
            if end > arena.committed:
                arena.committed = end
            launches = arena.launches
            launches.append(launch)
            if len(launches) >= self.max_batch:
                return self._issue(arena)
        return False

    def on_issue(self) -> None:
        """Set by the backend: retire what completed, apply back-pressure (no lock held)."""

    # ----------------------------------------------------------- batches ----
    def _find(self, stream, dev) -> Arena:
        """Lock held: this thread's arena for (dev, stream), made if needed."""
        thread = threading.current_thread()
        key = (threading.get_ident(), dev, stream)
        arena = self.arenas.get(key)
        if arena is not None and not arena.closed and arena.thread is thread:
            return arena
        if len(self.arenas) >= self.max_arenas:
            self._prune(everything=True)
        capacity = size_class(self.arena_bytes)
        handle, base = self.device.arena(capacity, stream, dev)
        self.arenas_made += 1
        arena = self.arenas[key] = Arena(thread, dev, stream, handle, base, capacity)
        return arena

    def _grow(self, arena: Arena, size: int) -> None:
        """Lock held, arena empty: replace its region by a zeroed one of at least ``size`` bytes. The old
        one goes back to the device allocator, ordered after the work already queued on its stream."""
        capacity = size_class(max(size, self.arena_bytes))
        arena.handle, arena.base = self.device.arena(capacity, arena.stream, arena.device)
        arena.capacity = capacity
        self.arenas_made += 1

    def _issue(self, arena: Arena, other_thread: bool = False) -> bool:
        """Lock held: copy back and zero the committed, not yet issued part of ``arena``. True: a batch
        with launches was queued. ``other_thread``: not called by the arena's launching thread (whose
        stream is then known not to be capturing), so an arena whose stream is being captured into a
        CUDA graph is left for later: a copy queued now would join the graph."""
        start, end = arena.start, arena.committed
        queued = False
        if other_thread and end > start and self.device.capturing(arena.stream):
            return False
        if end > start:
            device = self.device
            launches = arena.launches
            if launches:
                copy = device.copy_region(arena.handle, start, end - start, arena.stream, arena.device)
                self.batches.append(HostBatch(copy, start, end - start, launches))
                arena.launches = []
                self.batch_bytes += end - start
                self.batch_launches += len(launches)
                self.issued += 1
                if len(self.batches) > self.peak_batches:
                    self.peak_batches = len(self.batches)
                queued = True
            device.zero_region(arena.handle, start, end - start, arena.stream, arena.device)
        if end >= arena.bump:
            arena.start = arena.bump = arena.committed = 0  # all issued: start over from the bottom
        else:
            arena.start = end  # a slot is in flight above: it goes with a later batch
        return queued

    def _prune(self, everything: bool) -> None:
        """Lock held: issue every arena; drop those now empty whose thread ended (all empty ones when
        ``everything``: their threads make new ones on their next launch)."""
        for key, arena in list(self.arenas.items()):
            alive = arena.thread.is_alive()
            if not alive:
                arena.committed = arena.bump  # its thread is gone: nothing can be in flight
            self._issue(arena, other_thread=True)
            if arena.bump == 0 and (everything or not alive):
                arena.closed = True
                del self.arenas[key]

    def issue_all(self) -> None:
        """Force out every arena's committed launches (drain/flush, from any thread)."""
        with self.lock:
            self._prune(everything=False)

    def oldest(self, block: bool):
        """The oldest queued batch if ``block`` or if its copy completed (removed from the queue), else
        None. The caller waits for it (outside the lock) and releases it after decoding."""
        with self.lock:
            batches = self.batches
            if not batches or not (block or self.device.ready(batches[0].copy)):
                return None
            batch = batches.popleft()
            self.batch_bytes -= batch.nbytes
            self.batch_launches -= len(batch.launches)
            return batch

    def pending_launches(self) -> int:
        """Launches committed and not yet retired (in arenas and in queued batches)."""
        with self.lock:
            return self.batch_launches + sum(len(a.launches) for a in self.arenas.values())

    def close(self) -> tuple[list, int]:
        """Drop every arena (the session ended); returns the batches still queued, for the caller to
        wait for and release, and how many committed launches were never issued (normally 0: the core
        flushes first; an arena whose stream was being captured into a CUDA graph keeps its launches)."""
        with self.lock:
            stranded = sum(len(arena.launches) for arena in self.arenas.values())
            for arena in self.arenas.values():
                arena.closed = True
            self.arenas = {}
            self.graph_slots = []  # back to the graphs' private pools: only their replays write there
            batches, self.batches = list(self.batches), deque()
            self.batch_bytes = self.batch_launches = 0
        return batches, stranded


class StagingPool:
    """Host staging buffers by size class: ``get`` reuses a free one or allocates, ``put`` gives it back.

    ``allocate(size)`` makes a new buffer of a class size. Free buffers stay for reuse until
    :meth:`clear`; how many exist is bounded by the most that were taken at once (the backend bounds
    that with back-pressure)."""

    def __init__(self, allocate) -> None:
        self.allocate = allocate
        self.free: dict[int, list] = {}
        self.created = 0  #: buffers allocated so far
        self.created_bytes = 0
        self.taken = 0  #: buffers handed out and not yet put back

    def get(self, nbytes: int):
        """``(size, buffer)`` with ``size >= nbytes``."""
        size = size_class(nbytes)
        free = self.free.get(size)
        if free:
            buffer = free.pop()
        else:
            buffer = self.allocate(size)
            self.created += 1
            self.created_bytes += size
        self.taken += 1
        return size, buffer

    def put(self, size: int, buffer) -> None:
        self.taken -= 1
        self.free.setdefault(size, []).append(buffer)

    def clear(self) -> None:
        self.free = {}
        self.taken = 0


class HostCopy:
    """One batch's copy back: its staging buffer (class ``size``), its event, ``nbytes`` valid bytes."""

    __slots__ = ("size", "staging", "event", "nbytes")

    def __init__(self, size, staging, event, nbytes) -> None:
        self.size, self.staging, self.event, self.nbytes = size, staging, event, nbytes


class _Staging:
    """A pinned host tensor with its memoryview (made once)."""

    __slots__ = ("tensor", "mv")

    def __init__(self, tensor) -> None:
        self.tensor = tensor
        self.mv = memoryview(tensor.numpy()).cast("B")


def torch_stream(torch, raw, device: int):
    """The torch stream for the raw ``CUstream`` Triton launches on, so that our copies and memsets are
    ordered with its kernels. Raw 0 is the legacy default stream, which is ``default_stream(device)``:
    ``ExternalStream(0)`` is NOT that stream in torch 2.11 (it names a stream of its own), and a memset
    queued there once erased the records of the kernel launched right after it."""
    if not raw:
        return torch.cuda.default_stream(device)
    return torch.cuda.ExternalStream(int(raw), device=device)


class TorchDevice:
    """CUDA through PyTorch: arenas from its caching allocator, pinned host staging, events; zeroing
    through the driver (:mod:`.cuda_driver`: a memset, not a kernel a CUPTI session would show).

    Every operation runs on the arena's own stream (whatever thread issues it), so the memset of a
    region follows its copy and precedes the kernels that reuse it without a device-wide sync. An
    arena is allocated under its stream, so dropping it lets torch reuse the memory only after the
    work already queued there. These calls happen once per batch, not per launch."""

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            from proton_core.plugin_api import BackendUnavailable

            raise BackendUnavailable("PyTorch sees no CUDA device; the instrumentation backend allocates its "
                                     "profile buffers through torch.cuda")
        self.torch = torch
        torch.cuda.current_device()  # initializes CUDA in torch, so the raw getter below is safe
        self.current = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        self._props: dict[int, dict] = {}
        self._events: list = []
        self._streams: dict[tuple, object] = {}
        self.pool = StagingPool(self._new_staging)
        self.driver = CudaDriver()
        # Per launch: Triton launches on torch's current stream, whose capture state torch reads cheaply.
        self.capturing_now = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
            torch.cuda.is_current_stream_capturing

    def _new_staging(self, size: int) -> _Staging:
        torch = self.torch
        return _Staging(torch.empty(size, dtype=torch.uint8, pin_memory=True))

    def _on(self, stream, device: int):
        """A context manager making (device, raw ``stream``) current."""
        key = (device, stream or 0)
        s = self._streams.get(key)
        if s is None:
            if len(self._streams) > 4 * MAX_ARENAS:
                self._streams.clear()
            s = self._streams[key] = torch_stream(self.torch, stream, device)
        return self.torch.cuda.stream(s)

    def arena(self, nbytes: int, stream, device: int):
        """A zeroed device region of ``nbytes``, allocated and zeroed on ``stream``: (tensor, address)."""
        torch = self.torch
        with self._on(stream, device):
            tensor = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
            self.driver.memset(tensor.data_ptr(), nbytes, stream, device)
        return tensor, tensor.data_ptr()

    def copy_region(self, handle, start: int, nbytes: int, stream, device: int) -> HostCopy:
        """Queue the copy of ``handle[start:start + nbytes]`` into a staging buffer, then an event, on
        ``stream``."""
        size, staging = self.pool.get(nbytes)
        event = self._events.pop() if self._events else self.torch.cuda.Event()
        with self._on(stream, device):
            staging.tensor[:nbytes].copy_(handle[start:start + nbytes], non_blocking=True)
            event.record()
        return HostCopy(size, staging, event, nbytes)

    def capturing(self, stream) -> bool:
        """Whether ``stream`` is being captured into a CUDA graph (or cannot be asked: then it is left
        alone too). Once per batch."""
        return self.driver.capturing(stream)

    def graph_slot(self, nbytes: int, stream, device: int):
        """A buffer for a captured launch, from the capturing graph's private pool (unzeroed: it is never
        read): (tensor, address)."""
        torch = self.torch
        with self._on(stream, device):
            tensor = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
        return tensor, tensor.data_ptr()

    def zero_region(self, handle, start: int, nbytes: int, stream, device: int) -> None:
        """Queue the memset of ``handle[start:start + nbytes]`` on ``stream`` (after its copy)."""
        with self._on(stream, device):  # the device guard makes its primary context current (cuda_driver)
            self.driver.memset(handle.data_ptr() + start, nbytes, stream, device)

    def ready(self, copy: HostCopy) -> bool:
        return copy.event.query()

    def wait(self, copy: HostCopy) -> None:
        copy.event.synchronize()

    def data(self, copy: HostCopy) -> memoryview:
        return copy.staging.mv[:copy.nbytes]

    def release(self, copy: HostCopy) -> None:
        """The copy completed and was decoded: its staging buffer and event are free again."""
        if copy.staging is not None:
            self.pool.put(copy.size, copy.staging)
            self._events.append(copy.event)
            copy.staging = copy.event = None

    def close(self) -> None:
        """Drop every buffer (the session ended); torch's allocators keep them cached for reuse."""
        self._events = []
        self._streams = {}
        self.pool.clear()

    def properties(self, device: int) -> dict:
        """``sm_clock_khz``, ``max_shared_mem`` and the core's device-info keys."""
        props = self._props.get(device)
        if props is None:
            from triton.runtime import driver

            raw = driver.active.utils.get_device_properties(device)
            major, minor = self.torch.cuda.get_device_capability(device)
            props = self._props[device] = {
                "sm_clock_khz": int(raw["sm_clock_rate"]), "max_shared_mem": int(raw["max_shared_mem"]),
                "info": {"arch": f"{major}{minor}", "num_sms": int(raw["multiprocessor_count"]),
                         "clock_rate": int(raw["sm_clock_rate"]),
                         "memory_clock_rate": int(raw.get("mem_clock_rate", 0)),
                         "bus_width": int(raw.get("mem_bus_width", 0))},
            }
        return props
