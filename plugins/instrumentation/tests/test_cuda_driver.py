"""The driver calls of the buffers (fake libcuda): the memset that zeroes arenas, retried once with the
device's primary context made current when the calling thread has none, any other failure one line
naming the device; the capture query, where a stream that cannot be asked counts as capturing."""

import ctypes
import types

import pytest

from proton_core.plugin_api import ProtonError
from proton_instrumentation.cuda_driver import CUDA_ERROR_INVALID_CONTEXT, CudaDriver


def fake_libcuda(codes, calls, captures=None):
    """A stand-in for libcuda: cuMemsetD8Async returns ``codes`` in turn, every call is logged."""
    codes = list(codes)

    def memset(address, value, nbytes, stream):
        calls.append(("memset", address, value, nbytes, stream))
        return codes.pop(0)

    def get_device(out, ordinal):
        calls.append(("device", ordinal))
        out._obj.value = 100 + ordinal
        return 0

    def retain(out, device):
        calls.append(("retain", device))
        out._obj.value = 0xC0 + device
        return 0

    def set_current(ctx):
        calls.append(("current", ctx.value))
        return 0

    def is_capturing(stream, out):
        code, status = (captures or {}).get(stream, (0, 0))
        out._obj.value = status
        return code

    return types.SimpleNamespace(cuMemsetD8Async=memset, cuDeviceGet=get_device, cuDevicePrimaryCtxRetain=retain,
                                 cuCtxSetCurrent=set_current, cuStreamIsCapturing=is_capturing)


def test_memset_goes_to_the_raw_stream_with_zero():
    calls = []
    CudaDriver(fake_libcuda([0], calls)).memset(0x1000, 4096, 0x7F00, 0)
    assert calls == [("memset", 0x1000, 0, 4096, 0x7F00)]


def test_a_thread_without_a_context_gets_the_primary_context_once_per_device():
    calls = []
    driver = CudaDriver(fake_libcuda([CUDA_ERROR_INVALID_CONTEXT, 0, CUDA_ERROR_INVALID_CONTEXT, 0], calls))
    driver.memset(0x2000, 64, 0, 1)
    driver.memset(0x3000, 64, 0, 1)
    assert calls == [("memset", 0x2000, 0, 64, None), ("device", 1), ("retain", 101), ("current", 0xC0 + 101),
                     ("memset", 0x2000, 0, 64, None),
                     ("memset", 0x3000, 0, 64, None), ("current", 0xC0 + 101), ("memset", 0x3000, 0, 64, None)]


def test_a_failing_memset_is_one_line_naming_the_device():
    driver = CudaDriver(fake_libcuda([700], []))
    with pytest.raises(ProtonError, match=r"^instrumentation: zeroing 64 bytes .* CUDA device 2 .* error 700;") as err:
        driver.memset(0x2000, 64, 0, 2)
    assert "\n" not in str(err.value)


def test_nothing_to_zero_calls_nothing():
    calls = []
    CudaDriver(fake_libcuda([], calls)).memset(0x2000, 0, 0, 0)
    assert calls == []


def test_the_real_signatures_are_declared():
    lib = types.SimpleNamespace(**{n: types.SimpleNamespace() for n in (
        "cuMemsetD8Async", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuStreamIsCapturing")})
    CudaDriver(lib)
    assert lib.cuMemsetD8Async.argtypes == [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
    assert lib.cuMemsetD8Async.restype is ctypes.c_int


def test_capturing_reads_the_capture_status_and_an_unanswerable_stream_counts_as_capturing():
    driver = CudaDriver(fake_libcuda([], [], captures={0x10: (0, 1), 0x20: (0, 0), None: (906, 0)}))
    assert driver.capturing(0x10) is True  # CU_STREAM_CAPTURE_STATUS_ACTIVE
    assert driver.capturing(0x20) is False
    assert driver.capturing(0) is True  # the legacy stream while a capture runs: an error, so hands off
