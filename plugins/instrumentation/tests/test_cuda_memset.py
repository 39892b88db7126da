"""The driver memset that zeroes arenas: retried once with the device's primary context made current
when the calling thread has none; any other failure is one line naming the device (fake libcuda)."""

import ctypes
import types

import pytest

from proton_core.plugin_api import ProtonError
from proton_instrumentation.cuda_memset import CUDA_ERROR_INVALID_CONTEXT, DriverMemset


def fake_libcuda(codes, calls):
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

    return types.SimpleNamespace(cuMemsetD8Async=memset, cuDeviceGet=get_device,
                                 cuDevicePrimaryCtxRetain=retain, cuCtxSetCurrent=set_current)


def test_memset_goes_to_the_raw_stream_with_zero():
    calls = []
    DriverMemset(fake_libcuda([0], calls))(0x1000, 4096, 0x7F00, 0)
    assert calls == [("memset", 0x1000, 0, 4096, 0x7F00)]


def test_a_thread_without_a_context_gets_the_primary_context_once_per_device():
    calls = []
    memset = DriverMemset(fake_libcuda([CUDA_ERROR_INVALID_CONTEXT, 0, CUDA_ERROR_INVALID_CONTEXT, 0], calls))
    memset(0x2000, 64, 0, 1)
    memset(0x3000, 64, 0, 1)
    assert calls == [("memset", 0x2000, 0, 64, None), ("device", 1), ("retain", 101), ("current", 0xC0 + 101),
                     ("memset", 0x2000, 0, 64, None),
                     ("memset", 0x3000, 0, 64, None), ("current", 0xC0 + 101), ("memset", 0x3000, 0, 64, None)]


def test_a_failing_memset_is_one_line_naming_the_device():
    memset = DriverMemset(fake_libcuda([700], []))
    with pytest.raises(ProtonError, match=r"^instrumentation: zeroing 64 bytes .* CUDA device 2 .* error 700;") as err:
        memset(0x2000, 64, 0, 2)
    assert "\n" not in str(err.value)


def test_nothing_to_zero_calls_nothing():
    calls = []
    DriverMemset(fake_libcuda([], calls))(0x2000, 0, 0, 0)
    assert calls == []


def test_the_real_signatures_are_declared():
    lib = types.SimpleNamespace(**{n: types.SimpleNamespace() for n in (
        "cuMemsetD8Async", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent")})
    DriverMemset(lib)
    assert lib.cuMemsetD8Async.argtypes == [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
    assert lib.cuMemsetD8Async.restype is ctypes.c_int
