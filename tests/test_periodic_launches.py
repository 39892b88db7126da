"""``periodic_flushing:launches=N`` means N: phases end at N launches however fast they come.

The poll sees counts only at each flush, so a burst between two polls used to land in one part.  The
backend now moves its epoch on by itself every N launches (``Backend.switch_epochs``) and the core
binds each switched epoch to the next phase when it learns of it (proton_core/epoch_switching.py).
The synthetic backend switches as the cupti recorder does (its native test: plugins/cupti/tests).
"""

import threading

import pytest

import proton_core as proton
from proton_core import epoch_switching
from proton_core.testing import child, load_profile

NEVER = "poll=3600"  # the writer thread never polls during the test: only the backend can end phases


def counts(paths, kernel="k"):
    out = []
    for path in paths:
        node = [c for c in load_profile(path)[0]["children"] if c["frame"]["name"] == kernel]
        out.append(node[0]["metrics"]["count"] if node else 0)
    return out


def test_a_burst_faster_than_the_poll_ends_a_phase_every_n_launches(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=2000:{NEVER}")
    for _ in range(10_000):
        fake.launch("k")
    paths = proton.finalize(sid)
    assert counts(paths) == [2000] * 5  # the sixth phase, opened after the 10 000th launch, is empty: no part


def test_an_uneven_burst_keeps_the_rest_in_the_last_part(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=300:{NEVER}")
    for _ in range(1000):
        fake.launch("k")
    assert counts(proton.finalize(sid)) == [300, 300, 300, 100]


def test_more_switches_than_reserved_lose_nothing(tmp_path, fake, monkeypatch):
    """A spent block of epochs falls back to the poll: the launches after it stay in the last phase."""
    monkeypatch.setattr(epoch_switching, "RESERVED", 4)
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=10:{NEVER}")
    for _ in range(100):
        fake.launch("k")
    assert counts(proton.finalize(sid)) == [10, 10, 10, 10, 60]


def test_the_poll_reserves_a_new_block_after_a_manual_phase_end(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(epoch_switching, "RESERVED", 2)
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=10:{NEVER}")
    for _ in range(25):
        fake.launch("k")
    proton.data.advance_phase(sid)  # ends phase 2 (5 launches) and arms a new block
    for _ in range(25):
        fake.launch("k")
    assert counts(proton.finalize(sid)) == [10, 10, 5, 10, 10, 5]


def test_launches_from_several_threads_end_phases_at_n(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=1000:{NEVER}")

    def launch():
        for _ in range(2500):
            fake.launch("k")

    threads = [threading.Thread(target=launch) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = counts(proton.finalize(sid))
    assert sum(got) == 10_000
    assert all(900 <= n <= 1100 for n in got[:10]), got


def test_another_session_on_the_backend_keeps_one_phase(tmp_path, fake):
    """The epochs switch for every listener; only the session with launches= moves to a new phase."""
    plain = proton.start(str(tmp_path / "plain"), backend="fake")
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches=100:{NEVER}")
    for _ in range(250):
        fake.launch("k")
    assert counts(proton.finalize(sid)) == [100, 100, 50]
    (path,) = proton.finalize(plain)
    assert child(load_profile(path)[0], "k")["metrics"]["count"] == 250


def test_a_backend_that_cannot_switch_still_ends_phases_at_the_poll(tmp_path, fake, monkeypatch):
    monkeypatch.setattr(type(fake.backend), "switch_epochs", lambda self, every, last: False)
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:launches=5:poll=0.02")
    for _ in range(12):
        fake.launch("k")
    got = counts(proton.finalize(sid))
    assert sum(got) == 12 and len(got) == 1  # no poll came between the launches: one part, nothing lost


@pytest.mark.parametrize("every, launches", [(7, 50), (1, 5)])
def test_phase_sizes_match_the_count_exactly(tmp_path, fake, every, launches):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode=f"periodic_flushing:launches={every}:{NEVER}")
    for _ in range(launches):
        fake.launch("k")
    got = counts(proton.finalize(sid))
    full, rest = divmod(launches, every)
    assert got == [every] * full + ([rest] if rest else [])  # an empty last phase writes no part
