"""Batched copies back from per-stream device arenas, bounded memory, back-pressure (fake GPU).

The fake device (fake_triton.py) fails a test if a kernel gets a slot that was not zeroed since its
last use, or if a copy is read or released before it completed; totals are checked exactly.
"""

import contextlib
import threading
import types

import pytest

import proton_core as proton
from fake_triton import Kernel, LazyDict
from instr_buffers import launch as synth_launch, scope
from proton_core.testing import child, load_profile
from proton_instrumentation.backend import InstrumentationBackend
from proton_instrumentation.buffers import ProfileAllocator, StagingPool, size_class, torch_stream

TWO = Kernel("two", [(True, "one"), (False, "one"), (True, "four"), (False, "four")])
OTHER = Kernel("other", [(True, "one"), (False, "one")])
CALLS, CY, TIME = "scope_calls (exc)", "cycles (exc)", "scope_time (ns)(exc)"
LAUNCH = 2 * 1152  # bytes of a TWO launch with 2 CTAs (fake buffer_size 1024, 4 warps)


def ctas(n=2, warps=4, shift=0):
    return [{w: scope(0, 10, 110 + shift) + scope(1, 120, 520 + w) for w in range(warps)} for _ in range(n)]


def backend_of(ftriton):
    return ftriton.runtime.launch_exit_hook.calls[0].__self__.backend


def small_arena(monkeypatch, launches=7, max_batch=None):
    """Arenas holding ``launches`` TWO launches (rounded to a power of two: 16 KiB for 7)."""
    monkeypatch.setattr(ProfileAllocator, "arena_bytes", launches * LAUNCH)
    if max_batch is not None:
        monkeypatch.setattr(ProfileAllocator, "max_batch", max_batch)


@contextlib.contextmanager
def running_backend():
    """The backend alone (no core session): started, epoch 1, stopped at the end."""
    backend = InstrumentationBackend()
    backend.start(None)
    try:
        backend.configure(python_frames=False, trace=False)
        backend.set_epoch(1)
        yield backend
    finally:
        backend.stop()


def calls_of(path, kernel="two", scope_name="one"):
    return child(load_profile(path)[0], kernel, scope_name)["metrics"][CALLS]


def scope_metrics(path):
    """{(kernel, scope): metrics} of a profile's kernels at the root."""
    root = load_profile(path)[0]
    return {(k["frame"]["name"], s["frame"]["name"]): {m: v for m, v in s["metrics"].items()}
            for k in root["children"] for s in k["children"]}


def test_size_classes_and_pool_reuse():
    assert [size_class(n) for n in (1, 4096, 4097, 66560)] == [4096, 4096, 8192, 131072]
    pool = StagingPool(bytearray)
    a = pool.get(5000)
    pool.put(*a)
    assert pool.get(6000)[1] is a[1] and pool.created == 1 and pool.taken == 1
    assert pool.get(100)[0] == 4096 and pool.created == 2


def test_many_launches_share_one_copy_and_the_launch_path_does_no_device_work(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend, dev = backend_of(ftriton), ftriton.device
    for _ in range(300):
        ftriton.launch(TWO, ctas())
    assert dev.ops == [] and dev.arenas_made == 1  # no fill, copy or event per launch
    assert backend.outstanding() == 300 and backend.launches == 300
    proton.finalize()
    assert [op[0] for op in dev.ops] == ["copy", "zero"]  # one copy of the used region, then one memset
    assert dev.ops[0][2:] == (0, 300 * LAUNCH) == dev.ops[1][2:]
    assert calls_of(tmp_path / "p.hatchet") == 300 * 2 * 4
    assert not dev.live and dev.pool.created == 1


def test_batches_are_issued_every_max_batch_launches_and_retired_as_they_go(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 50)
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend, dev = backend_of(ftriton), ftriton.device
    for _ in range(200):
        ftriton.launch(TWO, ctas())
        assert backend.outstanding() < 50
    assert len(dev.copies) == 4 and backend.retired == 200  # each batch decoded once its copy completed
    assert dev.waits == 0 and dev.pool.created == 1  # the launches never waited; one staging buffer recycled
    assert len(backend.collector.records) == 1  # aggregated: one entry, whatever the launch count
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 200 * 2 * 4


def test_a_full_arena_is_copied_out_and_reused_from_the_bottom(tmp_path, ftriton, monkeypatch):
    small_arena(monkeypatch, 7)  # 16 KiB: 7 launches of 2304 bytes
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    for i in range(100):
        ftriton.launch(TWO, ctas(shift=i % 5))  # the fake asserts each slot it writes was zeroed
    dev = ftriton.device
    assert dev.arenas_made == 1 and len(dev.copies) == 100 // 7  # issued by the allocation that did not fit
    assert all(op[2:] == (0, 7 * LAUNCH) for op in dev.ops)  # each batch: the whole used region from 0
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 100 * 2 * 4
    cycles = child(load_profile(tmp_path / "p.hatchet")[0], "two", "one")["metrics"][CY]
    assert cycles == 2 * 4 * sum(100 + i % 5 for i in range(100))


def test_a_launch_larger_than_the_arena_grows_it_after_copying_what_is_there(tmp_path, ftriton, monkeypatch):
    small_arena(monkeypatch, 7)
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    for _ in range(3):
        ftriton.launch(TWO, ctas(2))
    ftriton.launch(TWO, ctas(64))  # 73 728 bytes: a new 128 KiB region, after the 3 launches were copied
    dev = ftriton.device
    assert dev.arenas_made == 2 and dev.ops[0][2:] == (0, 3 * LAUNCH)
    ftriton.launch(TWO, ctas(2))
    proton.finalize()
    assert dev.ops[-2][2:] == (0, 64 * 1152 + LAUNCH)  # the big launch and the next one, one copy
    assert calls_of(tmp_path / "p.hatchet") == (4 * 2 + 64) * 4


def test_flush_mid_arena_copies_what_is_used_and_starts_over(ftriton):
    with running_backend() as backend:
        for _ in range(10):
            ftriton.launch(TWO, ctas())
        first = backend.flush()
        assert first.records[0][-1] == 10 and ftriton.device.ops[0][2:] == (0, 10 * LAUNCH)
        for _ in range(5):
            ftriton.launch(TWO, ctas())  # from offset 0 again: the fake checks those slots were zeroed
        second = backend.flush()
        assert second.records[0][-1] == 5 and ftriton.device.ops[-2][2:] == (0, 5 * LAUNCH)
        assert backend.flush().records == [] and len(ftriton.device.copies) == 2  # nothing new: no copy


def test_launches_on_two_streams_use_two_arenas_each_copied_on_its_stream(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    for i in range(30):
        ftriton.launch(TWO, ctas(), stream=7 if i % 3 else 8)
    dev = ftriton.device
    assert dev.arenas_made == 2
    proton.finalize()
    assert sorted(op[:2] for op in dev.ops) == [("copy", 7), ("copy", 8), ("zero", 7), ("zero", 8)]
    assert sorted(op[3] for op in dev.ops if op[0] == "copy") == [10 * LAUNCH, 20 * LAUNCH]
    assert calls_of(tmp_path / "p.hatchet") == 30 * 2 * 4


def test_copies_and_memsets_go_to_the_stream_triton_launches_on():
    """Raw stream 0 (Triton's launches on torch's default stream) is torch's default stream, never
    ExternalStream(0): in torch 2.11 that is another stream, so a memset queued there after a copy
    erased the records of the kernel launched next (the tutorial-matmul bug)."""
    made = []

    class Cuda:
        @staticmethod
        def default_stream(device):
            made.append(("default", device))
            return ("default", device)

        @staticmethod
        def ExternalStream(ptr, device=None):
            made.append(("external", ptr, device))
            return ("external", ptr, device)

    fake_torch = types.SimpleNamespace(cuda=Cuda)
    assert torch_stream(fake_torch, 0, 1) == ("default", 1)
    assert torch_stream(fake_torch, None, 0) == ("default", 0)
    assert torch_stream(fake_torch, 0x7F00, 1) == ("external", 0x7F00, 1)
    assert made == [("default", 1), ("default", 0), ("external", 0x7F00, 1)]


def test_a_copy_not_yet_complete_is_not_decoded(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 5)
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend, dev = backend_of(ftriton), ftriton.device
    dev.holding = True
    for _ in range(20):
        ftriton.launch(TWO, ctas())
    assert len(dev.copies) == 4 and backend.retired == 0 and not backend.collector.records
    assert backend.drain().records == []  # the periodic poll: nothing completed, nothing read
    assert backend.retired == 0 and dev.waits == 0
    dev.complete()
    dev.holding = False
    assert backend.drain().records[0][-1] == 20  # every batch completed: all decoded, no wait
    assert dev.waits == 0 and backend.outstanding() == 0
    proton.finalize()  # (the drains took the records past the session: the profile has none)


def test_back_pressure_bounds_queued_batches(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 4)
    monkeypatch.setattr(InstrumentationBackend, "max_batches", 3)
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend, dev = backend_of(ftriton), ftriton.device
    dev.holding = True  # the GPU never finishes on its own: only waiting completes copies
    for _ in range(50):
        ftriton.launch(TWO, ctas())
        assert len(backend.allocator.batches) <= 3 and backend.outstanding() <= backend.max_outstanding
    assert backend.allocator.peak_batches == 4  # one over the bound, just before the wait
    assert dev.waits > 0 and backend.retired >= 50 - 4 * 4
    assert dev.pool.created <= 4
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 50 * 2 * 4


def test_back_pressure_by_bytes(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 2)
    monkeypatch.setattr(InstrumentationBackend, "max_bytes", 3 * 2 * LAUNCH)  # three batches of 2 launches
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True
    for _ in range(21):
        ftriton.launch(TWO, ctas())
        assert backend.allocator.batch_bytes <= 3 * 2 * LAUNCH and len(backend.allocator.batches) <= 3
    proton.finalize()
    assert calls_of(tmp_path / "p.hatchet") == 21 * 2 * 4


def test_flush_decodes_everything_outstanding(tmp_path, ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 3)
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.device.holding = True
    for _ in range(10):
        ftriton.launch(TWO, ctas())
    assert backend.outstanding() == 10 and len(backend.allocator.batches) == 3  # + 1 launch in the arena
    proton.finalize()  # issues the rest and waits for each copy
    assert calls_of(tmp_path / "p.hatchet") == 10 * 2 * 4
    assert not ftriton.device.live


def test_stop_returns_every_buffer(ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "max_batch", 2)
    backend = InstrumentationBackend()
    backend.start(None)
    backend.configure(python_frames=False, trace=False)
    backend.set_epoch(1)
    ftriton.device.holding = True
    for _ in range(5):
        ftriton.launch(TWO, ctas())
    assert len(ftriton.device.live) == 2
    arena = backend.allocator.local.arena
    backend.stop()  # no flush: queued copies are waited for and released, every arena dropped
    assert not ftriton.device.live and backend.outstanding() == 0 and backend.allocator.batch_bytes == 0
    assert ftriton.device.closed == 1 and ftriton.device.pool.taken == 0 and not backend.allocator.arenas
    assert arena.closed


def test_a_drain_while_a_launch_is_in_flight_leaves_its_slot_for_the_next_batch(ftriton):
    """Another thread's drain between a launch's allocation and its exit hook (here: the same thread,
    which ``issue_all`` does not tell apart) copies and zeroes only the committed launches."""
    with running_backend() as backend:
        for _ in range(3):
            ftriton.launch(TWO, ctas())
        compiled = ftriton.compile(TWO)
        meta = LazyDict({"name": "two", "function": compiled.function, "stream": 7})
        address = ftriton.allocation._profile_allocator(LAUNCH, 128, 7)  # the 4th launch is allocated...
        ftriton.runtime.launch_enter_hook(meta)
        first = backend.drain()  # ...when the poll comes
        assert first.records[0][-1] == 3 and ftriton.device.ops[-1] == ("zero", 7, 0, 3 * LAUNCH)
        ftriton.device.write(address, synth_launch(ctas(), num_warps=4, buffer_bytes=1024))  # its kernel runs
        ftriton.runtime.launch_exit_hook(meta)
        ftriton.launch(TWO, ctas())
        second = backend.flush()
        assert second.records[0][-1] == 2 and ftriton.device.ops[-2] == ("copy", 7, 3 * LAUNCH, 2 * LAUNCH)
        assert backend.allocator.local.arena.bump == 0  # all issued: the arena starts over


def test_a_launch_that_failed_before_its_exit_hook_is_skipped(ftriton):
    with running_backend() as backend:
        compiled = ftriton.compile(TWO)
        ftriton.launch(TWO, ctas())
        meta = LazyDict({"name": "two", "function": compiled.function, "stream": 7})
        ftriton.allocation._profile_allocator(LAUNCH, 128, 7)
        ftriton.runtime.launch_enter_hook(meta)  # cuLaunchKernelEx fails: no exit hook
        ftriton.launch(TWO, ctas())
        batch = backend.flush()
        assert batch.records[0][-1] == 2 and batch.dropped == 0
        assert ftriton.device.ops[0] == ("copy", 7, 0, 3 * LAUNCH)  # the empty slot is copied and zeroed too


def test_each_thread_has_its_own_arena_and_an_ended_threads_arena_is_drained_and_dropped(tmp_path, ftriton):
    proton.start(str(tmp_path / "p"), backend="instrumentation")
    backend = backend_of(ftriton)
    ftriton.compile(TWO)  # compiled (and loaded below) on the main thread
    ftriton.launch(TWO, ctas())

    def work():
        for _ in range(5):
            ftriton.launch(TWO, ctas())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert ftriton.device.arenas_made == 2 and len(backend.allocator.arenas) == 2
    batch = backend.drain()
    assert batch.records[0][-1] == 6
    assert len(backend.allocator.arenas) == 1  # the ended thread's arena, emptied, is gone
    assert {k[4]: dict(k[5])[CALLS] for k in batch.kernel_metrics}[("one",)] == 6 * 2 * 4
    proton.finalize()


@pytest.mark.parametrize("streams", [(7,), (7, 8)])
def test_totals_are_those_of_the_per_launch_path(tmp_path, ftriton, monkeypatch, streams):
    """Batched (small arenas, several kernels interleaved) against one launch per batch: the same
    profile. On one stream even float sums match bit for bit (same order); on two, the integers."""
    def run(name):
        proton.start(str(tmp_path / name), backend="instrumentation")
        for i in range(40):
            ftriton.launch(TWO, ctas(1 + i % 3, shift=i % 7), stream=streams[i % len(streams)])
            ftriton.launch(OTHER, [{w: scope(0, 5, 50 + w + i) for w in range(4)}], stream=streams[0])
        proton.finalize()
        return scope_metrics(tmp_path / f"{name}.hatchet")

    small_arena(monkeypatch, 5)
    batched = run("batched")
    monkeypatch.setattr(ProfileAllocator, "max_batch", 1)
    single = run("single")
    assert len(ftriton.device.copies) > 80  # the second run copied each launch on its own
    if len(streams) == 1:
        assert batched == single
    else:
        drop = (lambda d: {k: {m: v for m, v in ms.items() if m != TIME} for k, ms in d.items()})
        assert drop(batched) == drop(single)
        assert all(batched[k][TIME] == pytest.approx(single[k][TIME]) for k in batched)
    assert batched[("other", "one")][CY] == sum(45 + w + i for i in range(40) for w in range(4))


def test_slots_are_aligned_as_triton_asks_and_wrap_to_the_bottom(ftriton, monkeypatch):
    monkeypatch.setattr(ProfileAllocator, "arena_bytes", 8192)
    alloc = ProfileAllocator(ftriton.device)
    got = []
    for size in (100, 300, 256, 1000, 5000, 3000):
        address = alloc(size, 256, 7)
        arena, off, n = alloc.take()
        got.append(off)
        assert address == arena.base + off and address % 256 == 0 and n == size
        alloc.commit(types.SimpleNamespace(arena=arena, offset=off, nbytes=size, launch_id=0))
    # 100 at 0, 300 at 256, 256 at 768, 1000 at 1024, 5000 at 2048; 3000 does not fit: a batch, then 0
    assert got == [0, 256, 768, 1024, 2048, 0]
    assert len(alloc.batches) == 1 and alloc.batches[0].nbytes == 2048 + 5000


def test_launches_captured_into_a_cuda_graph_get_slots_of_their_own_and_a_warning(tmp_path, ftriton, caplog):
    """A captured launch's slot is written by every replay of the graph, so it must never be an arena
    slot that later launches reuse; its records are never read (replays are invisible to the hooks),
    and that is said once, naming the kernel. Eager launches around the capture are exact."""
    dev = ftriton.device
    proton.start(str(tmp_path / "g"), backend="instrumentation")
    for _ in range(3):
        ftriton.launch(TWO, ctas())
    dev.capture = True
    for _ in range(4):
        ftriton.launch(TWO, ctas())
    dev.capture = False
    slots = dict(dev.regions)
    for _ in range(5):
        ftriton.launch(TWO, ctas())
    allocator = backend_of(ftriton).allocator
    assert dev.graph_slots == 4 and len(allocator.graph_slots) == 4
    proton.finalize()
    assert allocator.graph_slots == []  # released with the session
    assert calls_of(tmp_path / "g.hatchet") == 8 * 2 * 4  # the eager launches, all of them
    assert child(load_profile(tmp_path / "g.hatchet")[0], "two")["metrics"]["count"] == 8
    graph_bases = [b for b in slots if b >= dev.ARENA_STRIDE * 10_000]
    assert len(graph_bases) == 4  # the captured launches wrote there, not into the arena
    lines = [r.getMessage() for r in caplog.records if "CUDA graph capture" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("kernel two was launched during CUDA graph capture")


def test_a_drain_leaves_an_arena_whose_stream_is_being_captured_until_the_capture_ended(ftriton):
    """Another thread's drain must not queue a copy on a stream under capture (it would join the
    graph); the arena goes out at the next drain or flush after the capture."""
    with running_backend() as backend:
        for i in range(6):
            ftriton.launch(TWO, ctas(), stream=7 if i % 2 else 8)
        dev = ftriton.device
        dev.capturing_streams = {7}
        first = backend.drain()
        assert first.records[0][-1] == 3 and [op[:2] for op in dev.ops] == [("copy", 8), ("zero", 8)]
        dev.capturing_streams = set()
        second = backend.flush()
        assert second.records[0][-1] == 3 and [op[:2] for op in dev.ops[2:]] == [("copy", 7), ("zero", 7)]


def test_launches_left_in_an_arena_under_capture_at_stop_are_named_in_one_warning(ftriton, caplog):
    with running_backend() as backend:
        for _ in range(3):
            ftriton.launch(TWO, ctas(), stream=7)
        ftriton.device.capturing_streams = {7}
        assert backend.flush().records == []  # the capture holds them back
    lines = [r.getMessage() for r in caplog.records if "not read back" in r.getMessage()]
    assert lines == ["instrumentation: 3 launch(es) were not read back: their stream was being captured into a "
                     "CUDA graph when the session ended (end the capture before finalize)"]
