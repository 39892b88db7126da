"""The native CUPTI recorder passes the backend contract, through the backend's own Python shell.

No GPU is needed: the test bindings feed the recorder what CUPTI's launch
callback and activity buffers would, and the same suite runs against the
synthetic backend in the core's tests.
"""

import itertools
import time

import pytest

from proton_core.testing import BackendContract, Driver

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(not hasattr(_cupti, "_test_reset"),
                                reason="proton_cupti._cupti was built without PROTON_CUPTI_TESTING=ON")

from cupti_helpers import recorder_backend  # noqa: E402


RecorderBackend = recorder_backend(_cupti)


class RecorderDriver(Driver):
    correlation = itertools.count(1 << 20)

    def __init__(self) -> None:
        _cupti._test_reset()
        self.backend = RecorderBackend()
        self.backend.configure(python_frames=False, trace=False)
        self.backend.set_epoch(0)
        self.backend.set_context(0)

    def launch(self, kernel, duration_ns=1000, device=0):
        corr = next(self.correlation)
        _cupti._test_launch(corr)
        start = time.monotonic_ns()
        _cupti._test_kernel(corr, kernel, device=device, start=start, end=start + duration_ns)


class TestNativeRecorder(BackendContract):
    @pytest.fixture
    def driver(self):
        driver = RecorderDriver()
        yield driver
        driver.backend.set_epoch(0)
        driver.backend.configure(python_frames=False, trace=False)
        _cupti._test_reset()
