"""mode="periodic_flushing": complete phases are written to part files and freed."""

import time

import pytest

import proton_core as proton
from proton_core.testing import child, load_profile


def count(path, *names):
    return child(load_profile(path)[0], *names)["metrics"]["count"]


def test_explicit_phases_are_written_as_parts_and_freed(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=0.05")
    fake.launch("k")
    proton.data.advance_phase(sid)
    fake.launch("k")
    fake.launch("k")
    deadline = time.monotonic() + 5
    while not (tmp_path / "run.part_0.hatchet").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert count(tmp_path / "run.part_0.hatchet", "k") == 1
    from proton_core.session import MANAGER
    assert 0 not in MANAGER.sessions[sid].phases.profiles  # written, then freed
    paths = proton.finalize(sid)
    assert paths == [str(tmp_path / "run.part_0.hatchet"), str(tmp_path / "run.part_1.hatchet")]
    assert count(tmp_path / "run.part_1.hatchet", "k") == 2
    assert not (tmp_path / "run.hatchet").exists()


def test_interval_advances_phases_by_itself(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:interval=0.1:poll=0.02")
    for _ in range(3):
        fake.launch("k")
        time.sleep(0.25)
    paths = proton.finalize(sid)
    assert len(paths) >= 3
    assert sum(count(p, "k") for p in paths) == 3


def test_launch_count_advances_phases(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:launches=5:poll=0.02")
    for _ in range(5):
        fake.launch("k")
    time.sleep(0.3)
    for _ in range(2):
        fake.launch("k")
    paths = proton.finalize(sid)
    assert [count(p, "k") for p in paths] == [5, 2]


@pytest.mark.parametrize("mode, message", [
    ("periodic_flushing:every=3", "'every=3' is not an option of periodic_flushing"),
    ("periodic_flushing:interval=-1", "must be positive"),
    ("periodic_flushing:launches=many", "invalid literal"),
    ("periodic_flushing:format=xml", "unknown output_format 'xml'"),
])
def test_bad_options_are_one_line(tmp_path, mode, message):
    with pytest.raises(proton.ProtonError, match=message):
        proton.start(str(tmp_path / "run"), backend="fake", mode=mode)


def test_an_empty_run_still_leaves_one_file(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing")
    assert proton.finalize(sid) == [str(tmp_path / "run.part_0.hatchet")]


def test_the_poll_drains_and_completes_a_phase_only_when_one_waits(tmp_path, fake):
    """Between phase ends the poll takes only what the backend has ready (``drain``: no device sync,
    no forced CUPTI flush); a complete ``flush`` runs only while an ended phase may owe records."""
    from proton_core.session import MANAGER

    calls = []
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=0.02")
    backend = fake.backend
    flush = backend.flush

    def drain():
        calls.append("drain")
        return flush()  # the synthetic backend has everything ready at once

    def full():
        calls.append("flush")
        return flush()

    backend.drain, backend.flush = drain, full
    fake.launch("k")
    time.sleep(0.2)
    assert "drain" in calls and "flush" not in calls
    assert MANAGER.sessions[sid].phases.profiles[0].tree.root.children  # drained records are filed
    assert not MANAGER.sessions[sid].phases.is_complete(0)  # a drain completes nothing
    proton.data.advance_phase(sid)
    deadline = time.monotonic() + 5
    while not (tmp_path / "run.part_0.hatchet").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "flush" in calls  # the ended phase needed a complete flush
    n = calls.count("flush")
    time.sleep(0.2)
    assert calls.count("flush") == n  # and once it was complete, drains again
    fake.launch("k")
    paths = proton.finalize(sid)
    assert [count(p, "k") for p in paths] == [1, 1]


def test_the_last_parts_are_written_in_the_parts_format(tmp_path, fake):
    """``periodic_flushing:format=hatchet_msgpack``: the parts finalize writes come out in that format too."""
    sid = proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=3600:format=hatchet_msgpack")
    fake.launch("k")
    proton.data.advance_phase(sid)
    fake.launch("k")
    paths = proton.finalize(sid)
    assert paths == [str(tmp_path / "run.part_0.hatchet_msgpack"), str(tmp_path / "run.part_1.hatchet_msgpack")]
