"""Profile buffers: Triton's profile allocator, and the device operations behind it.

Triton's launcher asks ``_allocation._profile_allocator(grid * num_ctas * profile_scratch_size,
align, stream)`` for an instrumented kernel, in Python, right before the C launcher calls the launch
enter hook (DESIGN.md §2). :class:`ProfileAllocator` is that callable: it returns a zeroed device
buffer (a CTA that never ran then shows no preamble, which the decoder counts instead of reading
stale bytes) and leaves it, with its size and stream, for the enter hook of the same thread.

The device work goes through a small interface (:class:`TorchDevice` on a GPU; the CPU tests pass a
fake with the same methods): ``current()``, ``alloc_zeroed(nbytes, stream)``, ``copy_to_host(buffer,
nbytes, stream)``, ``ready(copy)``, ``wait(copy)``, ``data(copy)``, ``properties(device)``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass
class Pending:
    """A buffer handed to the launcher, waiting for its launch's enter hook."""

    buffer: object
    nbytes: int
    stream: int


class ProfileAllocator:
    """What ``set_profile_allocator`` gets while our sessions run."""

    owner = "proton-plugin"

    def __init__(self, device) -> None:
        self.device = device
        self.local = threading.local()

    def __call__(self, size: int, alignment: int, stream):
        nbytes = (int(size) + alignment - 1) // alignment * alignment if alignment and alignment > 1 else int(size)
        buffer = self.device.alloc_zeroed(max(nbytes, 1), stream)
        self.local.pending = Pending(buffer, int(size), stream)
        return buffer

    def take(self) -> Pending | None:
        """The buffer of the launch now entering on this thread (None: the kernel is not instrumented)."""
        pending = getattr(self.local, "pending", None)
        self.local.pending = None
        return pending


@dataclass
class HostCopy:
    host: object
    event: object
    buffer: object  # kept alive until the copy completed


class TorchDevice:
    """CUDA through PyTorch: its caching allocators (device and pinned host) and its events.

    Every operation runs on the launch's own stream, so the zeroing precedes the kernel and the copy
    follows it without a device-wide sync."""

    def __init__(self) -> None:
        import torch

        if not torch.cuda.is_available():
            from proton_core.plugin_api import BackendUnavailable

            raise BackendUnavailable("PyTorch sees no CUDA device; the instrumentation backend allocates its "
                                     "profile buffers through torch.cuda")
        self.torch = torch
        self._props: dict[int, dict] = {}

    def current(self) -> int:
        return self.torch.cuda.current_device()

    def _stream(self, stream):
        cuda = self.torch.cuda
        current = cuda.current_stream()
        if not stream or int(stream) == current.cuda_stream:
            return current
        return cuda.ExternalStream(int(stream))

    def alloc_zeroed(self, nbytes: int, stream):
        torch = self.torch
        with torch.cuda.stream(self._stream(stream)):
            return torch.zeros(nbytes, dtype=torch.uint8, device="cuda")

    def copy_to_host(self, buffer, nbytes: int, stream) -> HostCopy:
        torch = self.torch
        s = self._stream(stream)
        with torch.cuda.stream(s):
            host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            host.copy_(buffer[:nbytes], non_blocking=True)
            event = torch.cuda.Event()
            event.record(s)
        return HostCopy(host, event, buffer)

    def ready(self, copy: HostCopy) -> bool:
        return copy.event.query()

    def wait(self, copy: HostCopy) -> None:
        copy.event.synchronize()

    def data(self, copy: HostCopy) -> memoryview:
        return memoryview(copy.host.numpy()).cast("B")

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
