"""The backend contract as a test suite: what every backend's flush must deliver.

Subclass :class:`BackendContract` in a test module and give it a ``driver``
fixture returning a :class:`Driver` (a fresh backend, configured with neither
frames nor trace, epoch 0, context 0).  The synthetic backend and the native
CUPTI recorder both run it, so the pure-Python model that the core's tests
rely on cannot drift from the real hot path.
"""

from __future__ import annotations

import os
import threading

from ..backend import NODE_CONTEXT, NODE_FRAME, Backend, Batch, context_setter
from ..context import is_internal


class Driver:
    """A backend under test plus the one thing the contract cannot do through it: launch a kernel."""

    backend: Backend

    def launch(self, kernel: str, duration_ns: int = 1000, device: int = 0) -> None:
        """One kernel launched from the calling thread that ran for ``duration_ns`` on ``device``."""
        raise NotImplementedError


def chains(nodes) -> dict[int, tuple]:
    """node id -> ((kind, value), ...) from the root, for the nodes of one or more batches."""
    by_id = {n[0]: n for n in nodes}
    out = {}
    for nid in by_id:
        chain, cur = [], nid
        while cur:
            _, parent, kind, value = by_id[cur]
            chain.append((kind, value))
            cur = parent
        out[nid] = tuple(reversed(chain))
    return out


class BackendContract:
    """Tests every backend passes; subclasses provide the ``driver`` fixture."""

    @staticmethod
    def set_context(driver: Driver, context_id: int) -> None:
        setter = context_setter(driver.backend) or driver.backend.set_context
        setter(context_id)

    @staticmethod
    def flush(driver: Driver) -> Batch:
        batch = driver.backend.flush()
        assert isinstance(batch, Batch)
        assert batch.device_type == driver.backend.device_type
        return batch

    def test_nothing_is_recorded_at_epoch_zero(self, driver):
        self.set_context(driver, 3)
        driver.launch("k")
        assert self.flush(driver).records == []

    def test_records_aggregate_by_epoch_context_kernel_device(self, driver):
        driver.backend.set_epoch(1)
        self.set_context(driver, 5)
        driver.launch("kA", 250)
        driver.launch("kA", 100)
        driver.launch("kA", 7, device=1)
        self.set_context(driver, 9)
        driver.launch("kB", 20)
        driver.backend.set_epoch(2)
        driver.launch("kB", 1)
        batch = self.flush(driver)
        paths = chains(batch.nodes)
        by_ctx = {paths[node]: node for node in paths}
        five, nine = by_ctx[((NODE_CONTEXT, 5),)], by_ctx[((NODE_CONTEXT, 9),)]
        assert sorted(batch.records) == sorted([
            (1, five, "kA", 0, 350, 2), (1, five, "kA", 1, 7, 1), (1, nine, "kB", 0, 20, 1), (2, nine, "kB", 0, 1, 1),
        ])
        assert batch.dropped == 0

    def test_nodes_are_delivered_once_and_flush_empties(self, driver):
        driver.backend.set_epoch(1)
        self.set_context(driver, 4)
        driver.launch("k")
        first = self.flush(driver)
        assert [(kind, value) for _, _, kind, value in first.nodes] == [(NODE_CONTEXT, 4)]
        assert self.flush(driver).records == []
        driver.launch("k")
        second = self.flush(driver)
        assert second.nodes == [] and [r[1] for r in second.records] == [first.nodes[0][0]]

    def test_the_context_is_per_thread(self, driver):
        driver.backend.set_epoch(1)
        self.set_context(driver, 11)
        barrier = threading.Barrier(2)

        def other():
            self.set_context(driver, 12)
            barrier.wait()
            driver.launch("k_other")

        thread = threading.Thread(target=other)
        thread.start()
        barrier.wait()
        driver.launch("k_main")
        thread.join()
        batch = self.flush(driver)
        paths = chains(batch.nodes)
        got = {r[2]: paths[r[1]] for r in batch.records}
        assert got == {"k_main": ((NODE_CONTEXT, 11),), "k_other": ((NODE_CONTEXT, 12),)}

    def test_trace_keeps_one_event_per_kernel(self, driver):
        driver.backend.configure(python_frames=False, trace=True)
        driver.backend.set_epoch(3)
        self.set_context(driver, 2)
        driver.launch("k", 500)
        driver.launch("k", 700)
        batch = self.flush(driver)
        assert [(e[0], e[2], e[6] - e[5]) for e in batch.events] == [(3, "k", 500), (3, "k", 700)]
        assert {e[1] for e in batch.events} == {r[1] for r in batch.records}
        assert all(e[7] > 0 and e[8] == threading.get_native_id() for e in batch.events)
        driver.backend.configure(python_frames=False, trace=False)
        driver.launch("k")
        assert self.flush(driver).events == []

    def test_python_frames_sit_above_the_context_without_internal_ones(self, driver):
        driver.backend.configure(python_frames=True, trace=False)
        driver.backend.set_epoch(1)
        self.set_context(driver, 6)
        driver.launch("k")
        batch = self.flush(driver)
        (record,) = batch.records
        chain = chains(batch.nodes)[record[1]]
        assert chain[-1] == (NODE_CONTEXT, 6)
        frames = [value for kind, value in chain[:-1]]
        assert frames and all(kind == NODE_FRAME for kind, _ in chain[:-1])
        files = [f.rsplit(":", 1)[0] for f in frames]
        assert not any(is_internal(f) for f in files), files
        assert any(os.sep + "_pytest" + os.sep in f for f in files), files  # the test runner called the test
