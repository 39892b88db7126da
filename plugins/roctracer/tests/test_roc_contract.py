"""The AMD backend passes the backend contract, end to end through the simulated ROCm: each launch
goes through rocprofiler-sdk's kernel-dispatch callback on the launching thread, each record through
the SDK's buffer on its delivery thread, then the backend's own flush."""

import pytest

from proton_core.testing import BackendContract, Driver


class SimDriver(Driver):
    def __init__(self, sim) -> None:
        from proton_roctracer.backend import RocprofilerBackend

        self.sim = sim
        self.backend = RocprofilerBackend()
        self.backend.ordinals = {0: 0, 1: 1, 2: 2, 3: 3}  # whatever *_VISIBLE_DEVICES this process has
        self.backend.start(None)
        self.backend.configure(python_frames=False, trace=False)
        self.backend.set_epoch(0)
        self.backend.set_context(0)

    def launch(self, kernel, duration_ns=1000, device=0):
        self.sim.dispatch(kernel, gpu=device, duration_ns=duration_ns)


class TestSimulatedRocm(BackendContract):
    @pytest.fixture
    def driver(self, script):
        driver = SimDriver(script)
        yield driver
        driver.backend.flush()
        driver.backend.stop()
        driver.backend.configure(python_frames=False, trace=False)

    def test_drain_hands_over_completed_records_without_a_device_sync(self, driver):
        driver.backend.set_epoch(1)
        driver.launch("k", 5)
        batch = driver.backend.drain()
        assert [(r[2], r[4], r[5]) for r in batch.records] == [("k", 5, 1)]
        assert driver.backend.flush().records == []
