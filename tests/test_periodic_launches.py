"""``launches=N`` ends each phase at the Nth launch, however fast the launches come (not at the next poll)."""

import threading

import proton_core as proton
from proton_core import periodic
from proton_core.testing import child, load_profile


def count(path):
    return child(load_profile(path)[0], "k")["metrics"]["count"]


def test_a_burst_faster_than_the_poll_is_cut_every_n_launches(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:launches=2000:poll=1000")
    for _ in range(10_000):
        fake.launch("k")
    paths = proton.finalize(sid)
    counts = [count(p) for p in paths]
    assert len(paths) == 5, counts
    assert all(1800 <= c <= 2200 for c in counts), counts
    assert counts == [2000] * 5  # exact on one thread


def test_launches_from_several_threads_are_counted_once_each(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:launches=500:poll=1000")

    def burst():
        for _ in range(1000):
            fake.launch("k")

    threads = [threading.Thread(target=burst) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    paths = proton.finalize(sid)
    assert sum(count(p) for p in paths) == 4000
    assert len(paths) == 8 and all(450 <= count(p) <= 550 for p in paths), [count(p) for p in paths]


def test_only_the_sessions_own_launches_count_and_the_recorder_is_restored(tmp_path, fake):
    other = proton.start(str(tmp_path / "other"), backend="fake")
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:launches=3:poll=1000")
    backend = fake.backend
    assert periodic.RECORDER in vars(backend)  # wrapped on the instance
    proton.deactivate(sid)
    for _ in range(5):
        fake.launch("k")  # the other session's only
    proton.activate(sid)
    for _ in range(4):
        fake.launch("k")
    paths = proton.finalize(sid)
    assert [count(p) for p in paths] == [3, 1]
    assert periodic.RECORDER not in vars(backend)  # the class's own method again
    proton.finalize(other)
