"""Where a launch is filed: a thread whose context the core never set goes under the main thread's context of the moment;
a graph never seen captured is counted.

autograd runs a CUDA backward pass on its own device threads, which never open a scope: without this,
upstream's ``test_scope_backward`` finds the backward's kernels at the root beside the scope that called
``backward()`` (decision 0245).  No GPU: the test bindings feed launches and records as CUPTI does."""

import ctypes
import threading

import pytest

from cupti_helpers import CorrelationIds
from proton_core.plugin_api import NODE_CONTEXT

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(
    not hasattr(_cupti, "_test_reset"),
    reason="proton_cupti._cupti was built without its test bindings; rebuild with "
           "SKBUILD_CMAKE_DEFINE=PROTON_CUPTI_TESTING=ON pip install -e plugins/cupti")

corr = CorrelationIds(1 << 23)


@pytest.fixture
def rec():
    assert threading.current_thread() is threading.main_thread()
    _cupti._test_reset()
    _cupti.configure(False, False, [], [])
    _cupti.set_epoch(1)
    _cupti.set_context(0)
    yield _cupti
    _cupti.set_context(0)
    _cupti.set_epoch(0)
    _cupti._test_reset()


def contexts_of(rec, corrs) -> list[int]:
    """The context id each launch in ``corrs`` was recorded under."""
    for c in corrs:
        rec._test_kernel(c, f"k{c}", start=1, end=2)
    nodes, records, _, _, _ = rec._test_flush()
    ctx_of = {nid: v for nid, _, kind, v in nodes if kind == NODE_CONTEXT}
    by_name = {name: ctx_of[node] for _, node, name, _, _, _ in records}
    return [by_name[f"k{c}"] for c in corrs]


def run_in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_a_thread_that_never_set_a_context_follows_the_main_threads_live(rec):
    rec.set_context(5)
    stay = threading.Event()
    go = threading.Event()
    done = threading.Event()
    corrs = []

    def worker():  # like autograd's device thread: launches, never sets a context
        corrs.append(corr())
        rec._test_launch_nogil(corrs[-1])
        stay.set()
        go.wait(5)
        corrs.append(corr())
        rec._test_launch_nogil(corrs[-1])
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    assert stay.wait(5)
    rec.set_context(9)  # the main thread moves on: the worker's next launch follows it, not a snapshot
    go.set()
    assert done.wait(5)
    t.join()
    assert contexts_of(rec, corrs) == [5, 9]


def test_a_thread_with_its_own_context_keeps_it(rec):
    rec.set_context(5)

    def worker():
        rec.set_context(7)
        c1 = corr()
        rec._test_launch(c1)
        rec.set_context(0)  # its own root, not the main thread's context
        c2 = corr()
        rec._test_launch(c2)
        return [c1, c2]

    corrs = run_in_thread(worker)
    assert contexts_of(rec, corrs) == [7, 0]


class NativeContext(ctypes.Structure):
    """The ``proton.native_context.v1`` capsule's table, as the torch plugin reads it."""
    _fields_ = [("version", ctypes.c_uint32), ("set", ctypes.c_void_p), ("get", ctypes.c_void_p)]


def native_get():
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    table = NativeContext.from_address(get_pointer(_cupti.native_context, b"proton.native_context.v1"))
    return ctypes.CFUNCTYPE(ctypes.c_uint64)(table.get)


def test_the_native_get_reads_the_inherited_context_on_a_fresh_thread(rec):
    """What native scope sources (torch, nvtx) read as the thread's context before they nest under it."""
    get = native_get()
    rec.set_context(11)
    assert run_in_thread(get) == 11
    assert run_in_thread(lambda: (rec.set_context(3), get())[1]) == 3
    assert get() == 11


def test_kernels_of_a_graph_never_seen_captured_are_counted(rec):
    """A graph captured before profiling began: its kernels are filed at the replay's context and counted, so
    the backend can say so once (proton_cupti.backend.UNCAPTURED_GRAPH)."""
    before = rec.stats()["uncaptured_graph"]
    rec.set_context(4)
    rec._test_graph_node(77)  # this graph node was seen created: not counted
    c1, c2 = corr(), corr()
    rec._test_launch(c1)
    rec._test_launch(c2)
    rec._test_kernel(c1, "seen", start=1, end=2, graph_node_id=77)
    rec._test_kernel(c2, "unseen", start=1, end=2, graph_node_id=991)
    assert rec.stats()["uncaptured_graph"] - before == 1
