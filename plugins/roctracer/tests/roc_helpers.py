"""The simulated ROCm (simrocm/simrocm.c) built and driven from Python, for the AMD backend's tests."""

from __future__ import annotations

import ctypes
import itertools
import os
import threading

from proton_core.testing import build_library

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "simrocm", "simrocm.c")
#: The wheels' spelling: only the versioned name exists.
LIBNAME = "librocprofiler-sdk.so.1"


def build(directory: str) -> str:
    """Compile the simulator into ``directory`` as librocprofiler-sdk.so.1; returns its path."""
    out = os.path.join(directory, LIBNAME)
    build_library(SOURCE, out, "-lpthread")
    return out


class Sim:
    """ctypes handle on the simulator with the script calls typed, and kernel names given ids."""

    def __init__(self, path: str) -> None:
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        lib.simrocm_dispatch.restype = ctypes.c_uint64
        lib.simrocm_dispatch.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
        lib.simrocm_register_kernel.argtypes = [ctypes.c_uint64, ctypes.c_char_p]
        lib.simrocm_script.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
        lib.simrocm_range_push.argtypes = [ctypes.c_char_p]
        lib.simrocm_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)] * 3
        for name in ("simrocm_capture_begin", "simrocm_capture_end", "simrocm_instantiate"):
            getattr(lib, name).restype = ctypes.c_uint64
            getattr(lib, name).argtypes = [ctypes.c_uint64]
        lib.simrocm_launch.restype = ctypes.c_uint64
        lib.simrocm_launch.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.c_uint64]
        lib.simrocm_graph_launch.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64]
        self._ids: dict[str, int] = {}
        self._next = itertools.count(100)
        self._lock = threading.Lock()

    def kernel_id(self, name: str) -> int:
        with self._lock:
            if name not in self._ids:
                self._ids[name] = next(self._next)
                self.lib.simrocm_register_kernel(self._ids[name], name.encode())
            return self._ids[name]

    def dispatch(self, name: str, gpu: int = 0, queue: int = 1, duration_ns: int = 1000, delay_ns: int = 0) -> int:
        return self.lib.simrocm_dispatch(self.kernel_id(name), gpu, queue, delay_ns, duration_ns)

    def launch(self, name: str, stream: int, module: bool = False, gpu: int = 0, duration_ns: int = 1000) -> None:
        """A kernel launched on ``stream`` through hipLaunchKernel (or hipModuleLaunchKernel): captured when
        the stream is capturing, else dispatched."""
        self.lib.simrocm_launch(self.kernel_id(name), stream, int(module), gpu, duration_ns)

    def script(self, seed: int = 0, drop_every: int = 0, per_callback: int = 64) -> None:
        self.lib.simrocm_script(seed, drop_every, per_callback)

    def push(self, message: str) -> None:
        self.lib.simrocm_range_push(message.encode())

    def pop(self) -> None:
        self.lib.simrocm_range_pop()

    def stats(self) -> tuple[int, int, int]:
        values = [ctypes.c_uint64() for _ in range(3)]
        self.lib.simrocm_stats(*[ctypes.byref(v) for v in values])
        return tuple(v.value for v in values)
