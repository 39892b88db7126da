"""Bounded memory on the launch path: recycled buffers, incremental retire, back-pressure (fake GPU)."""

import pytest

import proton_core as proton
from fake_triton import Kernel
from instr_buffers import scope
from proton_core.testing import child, load_profile
from proton_instrumentation.backend import InstrumentationBackend
from proton_instrumentation.buffers import StagingPool, size_class

TWO = Kernel("two", [(True, "one"), (False, "one"), (True, "four"), (False, "four")])
CALLS = "scope_calls (exc)"


def ctas(n=2, warps=4):
    return [{w: scope(0, 10, 110) + scope(1, 120, 520) for w in range(warps)} for _ in range(n)]


def backend_of(ftriton):
    return ftriton.runtime.launch_exit_hook.calls[0].__self__.backend


@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(InstrumentationBackend, "max_copies", 8)
    monkeypatch.setattr(InstrumentationBackend, "retire_batch", 4)


def calls_of(path, kernel="two", scope_name="one"):
    return child(load_profile(path)[0], kernel, scope_name)["metrics"][CALLS]


def test_size_classes_and_pool_reuse():
    assert [size_class(n) for n in (1, 4096, 4097, 66560)] == [4096, 4096, 8192, 131072]
    pool = StagingPool(bytearray)
    a = pool.get(5000)
    pool.put(*a)
    assert pool.get(6000)[1] is a[1] and pool.created == 1 and pool.taken == 1
    assert pool.get(100)[0] == 4096 and pool.created == 2


def test_buffers_are_reused_and_copies_retired_as_launches_go(tmp_path, ftriton, small_bounds):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    for _ in range(200):
        ftriton.launch(TWO, ctas())
        assert backend.outstanding() <= 8
    dev = ftriton.device
    assert dev.scratch_made == 1 and dev.zeroed == 200  # one device buffer, zeroed per launch
    assert dev.pool.created <= 5  # staging recycled: about one retire batch, not one per launch
    assert backend.retired >= 200 - 4  # decoded while launching, not at the flush
    assert len(backend.collector.records) == 1  # aggregated: one entry, whatever the launch count
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 200 * 2 * 4
    assert not dev.live and dev.waits == 0  # everything released; the launches never waited


def test_a_copy_not_yet_complete_is_not_decoded(tmp_path, ftriton, small_bounds):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True
    for _ in range(6):  # past the retire batch, below the bound
        ftriton.launch(TWO, ctas())
    assert backend.retired == 0 and backend.outstanding() == 6 and not backend.collector.records
    backend.lock.acquire()
    try:
        backend._retire(0)  # what the periodic poll (drain) does: nothing completed, nothing read
    finally:
        backend.lock.release()
    assert backend.retired == 0 and not backend.collector.records
    ftriton.device.complete()
    ftriton.device.holding = False
    ftriton.launch(TWO, ctas())  # its exit finds the batch complete: all retired
    assert backend.retired == 7 and backend.outstanding() == 0
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 7 * 2 * 4


def test_back_pressure_bounds_outstanding_copies(tmp_path, ftriton, small_bounds):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True  # the GPU never finishes on its own: only waiting completes copies
    for _ in range(50):
        ftriton.launch(TWO, ctas())
        assert backend.outstanding() <= 8
    assert backend.peak_outstanding == 9  # one over the bound, just before the wait
    assert ftriton.device.waits > 0 and backend.retired >= 50 - 8
    assert ftriton.device.pool.created <= 9
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 50 * 2 * 4


def test_back_pressure_by_bytes(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(InstrumentationBackend, "max_bytes", 3 * 2 * 1152)  # three launches of 2 CTAs
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True
    for _ in range(20):
        ftriton.launch(TWO, ctas())
        assert backend.queued_bytes <= 3 * 2 * 1152 and backend.outstanding() <= 3
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 20 * 2 * 4


def test_flush_decodes_everything_outstanding(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True
    for _ in range(10):
        ftriton.launch(TWO, ctas())
    assert backend.outstanding() == 10
    proton.finalize()  # the flush waits for each copy
    assert calls_of(tmp_path / "p.hatchet") == 10 * 2 * 4
    assert not ftriton.device.live


def test_stop_returns_every_buffer(ftriton):
    backend = InstrumentationBackend()
    backend.start(None)
    backend.configure(python_frames=False, trace=False)
    backend.set_epoch(1)
    ftriton.device.holding = True
    for _ in range(5):
        ftriton.launch(TWO, ctas())
    assert len(ftriton.device.live) == 5
    backend.stop()  # no flush: outstanding copies are waited for and released, then every buffer dropped
    assert not ftriton.device.live and backend.outstanding() == 0 and backend.queued_bytes == 0
    assert ftriton.device.closed == 1 and ftriton.device.pool.taken == 0 and not ftriton.device.scratch_buffers


def test_one_scratch_buffer_per_stream_grown_when_needed(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    ftriton.launch(TWO, ctas(2), stream=7)
    ftriton.launch(TWO, ctas(2), stream=8)
    ftriton.launch(TWO, ctas(2), stream=7)
    assert ftriton.device.scratch_made == 2
    ftriton.launch(TWO, ctas(64), stream=7)  # a bigger grid: that stream's buffer grows
    assert ftriton.device.scratch_made == 3
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == (3 * 2 + 64) * 4


def test_launches_of_several_kernels_interleaved_keep_exact_totals(tmp_path, ftriton, small_bounds):
    other = Kernel("other", [(True, "one"), (False, "one")])
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    for i in range(30):
        ftriton.launch(TWO, ctas())
        ftriton.launch(other, [{w: scope(0, 5, 50 + w) for w in range(4)}])
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 30 * 2 * 4
    assert calls_of(tmp_path / "p.hatchet", "other") == 30 * 4
    cycles = child(load_profile(tmp_path / "p.hatchet")[0], "other", "one")["metrics"]["cycles (exc)"]
    assert cycles == 30 * sum(45 + w for w in range(4))
