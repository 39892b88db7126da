"""Profile buffers: Triton's profile allocator, the recycled host staging pool, and the device behind them.

Triton's launcher asks ``_allocation._profile_allocator(grid * num_ctas * profile_scratch_size,
align, stream)`` for an instrumented kernel, in Python, right before the C launcher calls the launch
enter hook (DESIGN.md §2). :class:`ProfileAllocator` is that callable: it returns a zeroed device
buffer (a CTA that never ran then shows no preamble, which the decoder counts instead of reading
stale bytes) and leaves ``(buffer, nbytes, stream, device)`` for the enter hook of the same thread.

Nothing is allocated per launch in the steady state:

- **device scratch**: one buffer per (thread, device, stream), grown to a power of two when a launch
  needs more, zeroed with an asynchronous memset on the launch's stream. Reusing it is safe because
  the memset of the next launch on that stream is ordered after the previous launch's copy back;
  keying by thread keeps two threads launching on one stream from zeroing each other's buffer
  between a kernel and its copy.
- **host staging**: :class:`StagingPool`, pinned buffers in power-of-two size classes. A copy takes
  one, and the backend returns it (``release``) once the copy completed and was decoded.
- **events**: recycled with the staging buffer.

The device work goes through a small interface (:class:`TorchDevice` on a GPU; the CPU tests pass a
fake with the same methods): ``current()``, ``scratch(nbytes, stream, device)``,
``copy_to_host(buffer, nbytes, stream, device)``, ``ready(copy)``, ``wait(copy)``, ``data(copy)``,
``release(copy)``, ``close()``, ``properties(device)``.
"""

from __future__ import annotations

import threading

#: Smallest host staging class (bytes); classes are powers of two from here.
MIN_STAGING = 4096
#: Device scratch buffers kept (one per thread, device and stream); past this the cache starts afresh.
MAX_SCRATCH = 64


def size_class(nbytes: int) -> int:
    """The power of two (at least :data:`MIN_STAGING`) a buffer of ``nbytes`` is taken from."""
    return max(MIN_STAGING, 1 << (max(int(nbytes), 1) - 1).bit_length())


class ProfileAllocator:
    """What ``set_profile_allocator`` gets while our sessions run."""

    owner = "proton-plugin"

    def __init__(self, device) -> None:
        self.device = device
        self.local = threading.local()

    def __call__(self, size: int, alignment: int, stream):
        device = self.device
        dev = device.current()
        buffer = device.scratch(int(size), stream, dev)
        self.local.pending = (buffer, int(size), stream, dev)
        return buffer

    def take(self):
        """``(buffer, nbytes, stream, device)`` of the launch now entering on this thread (None: the
        kernel is not instrumented)."""
        local = self.local
        pending = getattr(local, "pending", None)
        local.pending = None
        return pending


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
    """One launch's copy back: its staging buffer (class ``size``), its event, ``nbytes`` valid bytes."""

    __slots__ = ("size", "staging", "event", "nbytes")

    def __init__(self, size, staging, event, nbytes) -> None:
        self.size, self.staging, self.event, self.nbytes = size, staging, event, nbytes


class _Staging:
    """A pinned host tensor with its memoryview (made once) and the last view used as copy target."""

    __slots__ = ("tensor", "mv", "view", "view_n")

    def __init__(self, tensor) -> None:
        self.tensor = tensor
        self.mv = memoryview(tensor.numpy()).cast("B")
        self.view, self.view_n = tensor, -1


class _Scratch:
    __slots__ = ("tensor", "view", "nbytes")

    def __init__(self, tensor) -> None:
        self.tensor, self.view, self.nbytes = tensor, tensor, -1


class TorchDevice:
    """CUDA through PyTorch: device scratch from its caching allocator, pinned host staging, events.

    Every operation runs on the launch's own stream, so the zeroing precedes the kernel and the copy
    follows it without a device-wide sync. Triton launches on torch's current stream, so the common
    case needs no stream switch; another stream goes through ``torch.cuda.stream``."""

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            from proton_core.plugin_api import BackendUnavailable

            raise BackendUnavailable("PyTorch sees no CUDA device; the instrumentation backend allocates its "
                                     "profile buffers through torch.cuda")
        self.torch = torch
        self._props: dict[int, dict] = {}
        self._raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
            (lambda dev: torch.cuda.current_stream(dev).cuda_stream)
        self.current = torch.cuda.current_device
        self._scratch: dict[tuple, _Scratch] = {}
        self._events: list = []
        self._streams: dict[int, object] = {}
        self.pool = StagingPool(self._new_staging)

    def _new_staging(self, size: int) -> _Staging:
        torch = self.torch
        return _Staging(torch.empty(size, dtype=torch.uint8, pin_memory=True))

    def _other_stream(self, stream):
        """A torch stream object for a raw handle that is not the current stream (rare)."""
        s = self._streams.get(stream)
        if s is None:
            if len(self._streams) > MAX_SCRATCH:
                self._streams.clear()
            s = self._streams[stream] = self.torch.cuda.ExternalStream(int(stream))
        return s

    def scratch(self, nbytes: int, stream, device: int):
        """The zeroed device buffer of this launch: this thread's buffer for (device, stream)."""
        key = (threading.get_ident(), device, stream)
        entry = self._scratch.get(key)
        if entry is None or entry.tensor.numel() < nbytes:
            entry = self._grow(key, nbytes, stream, device)
        if entry.nbytes != nbytes:
            entry.view, entry.nbytes = entry.tensor[:max(nbytes, 1)], nbytes
        if (stream or 0) == self._raw_stream(device):
            entry.view.zero_()
        else:
            with self.torch.cuda.stream(self._other_stream(stream)):
                entry.view.zero_()
        return entry.view

    def _grow(self, key, nbytes: int, stream, device: int) -> _Scratch:
        torch = self.torch
        if len(self._scratch) >= MAX_SCRATCH:
            self._scratch.clear()  # dropped buffers return to torch's allocator, ordered on their streams
        size = size_class(nbytes)
        if (stream or 0) == self._raw_stream(device):
            tensor = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device}")
        else:
            with torch.cuda.stream(self._other_stream(stream)):
                tensor = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device}")
        entry = self._scratch[key] = _Scratch(tensor)
        return entry

    def copy_to_host(self, buffer, nbytes: int, stream, device: int) -> HostCopy:
        """Queue the copy of ``buffer[:nbytes]`` into a staging buffer and an event, on ``stream``."""
        size, staging = self.pool.get(nbytes)
        if staging.view_n != nbytes:
            staging.view, staging.view_n = staging.tensor[:nbytes], nbytes
        event = self._events.pop() if self._events else self.torch.cuda.Event()
        source = buffer if buffer.numel() == nbytes else buffer[:nbytes]
        if (stream or 0) == self._raw_stream(device):
            staging.view.copy_(source, non_blocking=True)
            event.record()
        else:
            s = self._other_stream(stream)
            with self.torch.cuda.stream(s):
                staging.view.copy_(source, non_blocking=True)
                event.record(s)
        return HostCopy(size, staging, event, nbytes)

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
        self._scratch = {}
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
