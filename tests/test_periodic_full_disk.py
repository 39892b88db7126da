"""Periodic flushing survives a full disk: parts that cannot be written are kept, retried and written in order."""

import errno
import os
import tempfile

import pytest

import proton_core as proton
from proton_core import output, periodic
from proton_core.session import MANAGER
from proton_core.testing import child, load_profile


def count(path, *names):
    return child(load_profile(path)[0], *names)["metrics"]["count"]


@pytest.fixture
def full_disk(monkeypatch):
    """``state["fail"]`` more part writes under the session's own directory fail with ENOSPC
    (``None``: all of them); writes elsewhere (the fallback) go through."""
    real = output.write_profile
    state = {"fail": 0, "failed": 0, "own": None}

    def write_profile(profile, fmt, name, plugins, session_id):
        if os.path.dirname(os.path.abspath(name)) == state["own"] and (state["fail"] is None or state["fail"] > 0):
            if state["fail"] is not None:
                state["fail"] -= 1
            state["failed"] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(profile, fmt, name, plugins, session_id)

    monkeypatch.setattr(output, "write_profile", write_profile)
    return state


def start(tmp_path, full_disk):
    full_disk["own"] = str(tmp_path)
    # A poll far away: the test drives the writer's ticks itself, so each one is one retry.
    return proton.start(str(tmp_path / "run"), backend="fake", mode="periodic_flushing:poll=1000")


def phase(sid, fake, launches):
    for _ in range(launches):
        fake.launch("k")
    proton.data.advance_phase(sid)


def tick(sid):
    MANAGER.periodic_tick(MANAGER.sessions[sid])


def test_parts_kept_while_the_disk_is_full_are_written_in_order_when_room_returns(tmp_path, fake, full_disk, caplog):
    sid = start(tmp_path, full_disk)
    full_disk["fail"] = 4
    phase(sid, fake, 1)
    tick(sid)  # part 0 fails: kept
    phase(sid, fake, 2)
    tick(sid)  # part 0 fails again; part 1 waits behind it
    phase(sid, fake, 3)
    tick(sid)
    tick(sid)
    assert full_disk["failed"] == 4 and not list(tmp_path.glob("run.part_*"))
    assert MANAGER.sessions[sid].phases.complete_phases() == [0, 1, 2]  # all kept
    tick(sid)  # room again: 0, 1 and 2 are written, in order
    assert sorted(p.name for p in tmp_path.glob("run.part_*")) == [f"run.part_{n}.hatchet" for n in range(3)]
    fake.launch("k")
    paths = proton.finalize(sid)
    assert paths == [str(tmp_path / f"run.part_{n}.hatchet") for n in range(4)]
    assert [count(p, "k") for p in paths] == [1, 2, 3, 1]
    lines = [r.getMessage() for r in caplog.records]
    (failed,) = [m for m in lines if "cannot write part" in m]  # said once, not at each retry
    assert "No space left on device" in failed and "retrying" in failed
    (back,) = [m for m in lines if "room again" in m]
    assert "run.part_0.hatchet" in back
    assert all("\n" not in m for m in lines)
    assert periodic.DROPPED_PARTS_KEY not in load_profile(paths[0])[0]["metrics"]


def test_parts_beyond_the_cap_are_dropped_and_counted_in_the_next_parts_root(tmp_path, fake, full_disk, caplog,
                                                                           monkeypatch):
    monkeypatch.setattr(periodic, "MAX_KEPT_PARTS", 2)
    sid = start(tmp_path, full_disk)
    full_disk["fail"] = None
    for n in range(5):
        phase(sid, fake, n + 1)
        tick(sid)
    assert MANAGER.sessions[sid].phases.complete_phases() == [3, 4]  # the newest two kept, 0-2 dropped
    full_disk["fail"] = 0
    tick(sid)
    paths = proton.finalize(sid)
    assert paths == [str(tmp_path / f"run.part_{n}.hatchet") for n in (3, 4)]  # phase 5 is empty
    assert [count(p, "k") for p in paths] == [4, 5]
    roots = [load_profile(p)[0]["metrics"] for p in paths]
    assert roots[0][periodic.DROPPED_PARTS_KEY] == 3
    assert periodic.DROPPED_PARTS_KEY not in roots[1]  # counted once, not in every later part
    dropping = [r.getMessage() for r in caplog.records if "dropping" in r.getMessage()]
    assert len(dropping) == 1 and "more than 2 parts" in dropping[0]


def test_a_part_that_cannot_be_written_at_exit_goes_to_the_temporary_directory(tmp_path, fake, full_disk, caplog,
                                                                              monkeypatch):
    fallback = tmp_path / "tmpdir"
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    sid = start(tmp_path, full_disk)
    full_disk["fail"] = None
    phase(sid, fake, 1)
    tick(sid)
    fake.launch("k")
    fake.launch("k")
    paths = proton.finalize(sid)
    assert len(paths) == 2 and all(os.path.dirname(p) == str(fallback) for p in paths)
    assert [os.path.basename(p).rsplit(".part_", 1)[1] for p in paths] == ["0.hatchet", "1.hatchet"]
    assert len({os.path.basename(p).rsplit(".part_", 1)[0] for p in paths}) == 1  # one stem: viewed together
    assert str(os.getpid()) in os.path.basename(paths[0])
    assert [count(p, "k") for p in paths] == [1, 2]
    lines = [r.getMessage() for r in caplog.records if "instead" in r.getMessage()]
    assert len(lines) == 2 and all(p in line for p, line in zip(paths, lines))
