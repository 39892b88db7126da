"""The two CUDA driver calls the buffers make themselves: zeroing arenas (``cuMemsetD8Async``, on the
raw stream Triton launches on) and asking whether a stream is being captured into a CUDA graph
(``cuStreamIsCapturing``).

Why not ``tensor.zero_()``: that is a torch fill kernel, and a ``cupti`` session running beside ours
(issue 20's "kernel times from CUPTI, cycles from instrumentation") would show it as a kernel the user
never launched, under the user's own scope (1.4 ms of a 131 ms tutorial-matmul profile). A driver
memset is a memset activity, not a kernel, and it is queued on exactly the ``CUstream`` handle Triton's
launcher passes to ``cuLaunchKernelEx``, so it is ordered with the kernels by construction.

The driver API needs a current context on the calling thread. Torch's device guard makes the primary
context current when it switches devices; a thread that never did (a poller issuing batches) gets
``CUDA_ERROR_INVALID_CONTEXT``, and then the device's primary context (the one torch and Triton use) is
made current and the memset retried.
"""

from __future__ import annotations

import ctypes

from proton_core.plugin_api import ProtonError

CUDA_ERROR_INVALID_CONTEXT = 201


class CudaDriver:
    """``libcuda`` through ctypes (``lib``: a stand-in in the CPU tests); torch has loaded it already."""

    def __init__(self, lib=None) -> None:
        lib = lib if lib is not None else ctypes.CDLL("libcuda.so.1")
        self._memset = lib.cuMemsetD8Async
        self._memset.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        self._memset.restype = ctypes.c_int
        self._get_device = lib.cuDeviceGet
        self._get_device.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self._retain = lib.cuDevicePrimaryCtxRetain
        self._retain.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        self._set_current = lib.cuCtxSetCurrent
        self._set_current.argtypes = [ctypes.c_void_p]
        self._contexts: dict[int, ctypes.c_void_p] = {}
        self._is_capturing = lib.cuStreamIsCapturing
        self._is_capturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        self._is_capturing.restype = ctypes.c_int

    def capturing(self, stream) -> bool:
        """``stream`` is being captured into a CUDA graph, or the driver cannot say (the legacy stream
        while another stream captures answers with an error): then nothing may be queued on it."""
        status = ctypes.c_int(0)
        return bool(self._is_capturing(stream or None, ctypes.byref(status)) or status.value)

    def memset(self, address: int, nbytes: int, stream, device: int) -> None:
        """Zero ``nbytes`` at device ``address``, queued on ``stream``."""
        if nbytes <= 0:
            return
        code = self._memset(address, 0, nbytes, stream or None)
        if code == CUDA_ERROR_INVALID_CONTEXT:
            self._bind(device)
            code = self._memset(address, 0, nbytes, stream or None)
        if code:
            raise ProtonError(f"instrumentation: zeroing {nbytes} bytes of a profile buffer on CUDA device {device} "
                              f"failed with CUDA driver error {code}; the device may be in an error state")

    def _bind(self, device: int) -> None:
        """Make ``device``'s primary context current on this thread (retained once per device)."""
        ctx = self._contexts.get(device)
        if ctx is None:
            handle = ctypes.c_int()
            ctx = ctypes.c_void_p()
            if self._get_device(ctypes.byref(handle), device) or self._retain(ctypes.byref(ctx), handle.value):
                raise ProtonError(f"instrumentation: cannot reach CUDA device {device}'s primary context")
            self._contexts[device] = ctx
        if self._set_current(ctx):
            raise ProtonError(f"instrumentation: cannot make CUDA device {device}'s primary context current")
