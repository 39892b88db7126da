"""The cupti recorder moves its epoch on by itself every N launches (``periodic_flushing:launches=N``).

No GPU: the test bindings feed launches and kernel records through the recorder as CUPTI's callbacks
do.  The core's side (binding each switched epoch to a phase) is tested with the synthetic backend in
tests/test_periodic_launches.py; the GPU test runs real launches (test_gpu_cupti_lifecycle.py).
"""

import itertools
import threading
from collections import Counter

import pytest

_cupti = pytest.importorskip("proton_cupti._cupti", reason="proton-profiler-cupti extension not built")
pytestmark = pytest.mark.skipif(not hasattr(_cupti, "_test_reset"),
                                reason="proton_cupti._cupti was built without PROTON_CUPTI_TESTING=ON")

CORR = itertools.count(1 << 22)


@pytest.fixture
def recorder():
    _cupti._test_reset()
    _cupti.configure(False, False)
    _cupti.set_context(0)
    yield _cupti
    _cupti.set_epoch(0)
    _cupti._test_reset()


def launches_per_epoch(n, launch=_cupti._test_launch):
    corrs = [next(CORR) for _ in range(n)]
    for corr in corrs:
        launch(corr)
    return corrs


def epochs_of(corrs):
    for corr in corrs:
        _cupti._test_kernel(corr, "k", start=1, end=2)
    records = _cupti._test_flush(False)[1]
    return Counter({r[0]: r[5] for r in records})


def test_every_n_launches_the_epoch_moves_on_until_the_last_reserved(recorder):
    recorder.set_epoch(5)
    recorder.switch_epochs(100, 9)
    corrs = launches_per_epoch(1000)
    assert recorder.current_epoch() == 9
    assert epochs_of(corrs) == {5: 100, 6: 100, 7: 100, 8: 100, 9: 600}  # 9 is the last: no more switches
    assert recorder._test_max_epoch() == 9  # sampling retires epochs by it


def test_set_epoch_cancels_switching(recorder):
    recorder.set_epoch(3)
    recorder.switch_epochs(10, 50)
    first = launches_per_epoch(15)
    recorder.set_epoch(60)
    second = launches_per_epoch(30)
    assert epochs_of(first + second) == {3: 10, 4: 5, 60: 30}


def test_re_arming_restarts_the_count(recorder):
    recorder.set_epoch(1)
    recorder.switch_epochs(10, 20)
    first = launches_per_epoch(7)
    recorder.set_epoch(30)
    recorder.switch_epochs(10, 40)
    second = launches_per_epoch(25)
    assert epochs_of(first + second) == {1: 7, 30: 10, 31: 10, 32: 5}


def test_unarmed_epochs_never_move(recorder):
    recorder.set_epoch(2)
    corrs = launches_per_epoch(500)
    assert recorder.current_epoch() == 2 and epochs_of(corrs) == {2: 500}


def test_threads_launching_at_once_end_each_epoch_near_n(recorder):
    """Launches racing across a switch land one epoch early or late; each counts once."""
    recorder.set_epoch(1)
    recorder.switch_epochs(1000, 100)
    out, threads = [], []
    for _ in range(4):
        corrs = [next(CORR) for _ in range(2500)]
        out += corrs
        threads.append(threading.Thread(target=lambda c=corrs: [_cupti._test_launch_nogil(x) for x in c]))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = epochs_of(out)
    assert sum(got.values()) == 10_000
    assert sorted(got) == list(range(1, 11)) or sorted(got) == list(range(1, 12)), got
    assert all(900 <= got[e] <= 1100 for e in range(1, 11)), got
