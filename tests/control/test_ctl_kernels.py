"""Windows in one process with the synthetic backend: kernels are filed only inside windows, and a window
that cannot be written is kept, never lost."""

import errno
import os

import proton_core as proton
from proton_core import output
from proton_core.control.windows import Windows
from proton_core.manager import MANAGER
from proton_core.testing import child, child_names, load_profile


def kernels(path, *names):
    return child(load_profile(path)[0], *names)["metrics"]["count"]


def test_kernels_are_recorded_only_inside_windows(tmp_path, fake):
    sid = proton.start(str(tmp_path / "run"), backend="fake")
    windows = Windows()
    windows.idle()
    with proton.scope("outside"):
        fake.launch("k")
    assert windows.start() == f"session {sid} '{tmp_path}/run' recording window 1 (phase 1)"
    with proton.scope("inside"):
        fake.launch("k")
        fake.launch("k")
    said = windows.stop()
    part = tmp_path / "run.part_1.hatchet"
    assert said == f"session {sid} '{tmp_path}/run' idle; window 1 written to {part}"
    with proton.scope("outside"):
        fake.launch("k")
    windows.start()
    with proton.scope("again"):
        fake.launch("k")
    windows.stop()
    assert child_names(load_profile(part)[0]) == ["inside"] and kernels(part, "inside", "k") == 2
    second = tmp_path / "run.part_2.hatchet"
    assert child_names(load_profile(second)[0]) == ["again"] and kernels(second, "again", "k") == 1
    assert windows.status().startswith(f"idle: session {sid} '{tmp_path}/run', 2 windows written: {part}, {second}")
    assert 1 not in MANAGER.sessions[sid].phases.profiles  # written windows are freed
    proton.finalize(sid)
    assert child_names(load_profile(tmp_path / "run.hatchet")[0]) == []


def test_a_window_that_cannot_be_written_is_kept_and_written_at_the_next_stop(tmp_path, fake, monkeypatch):
    real, failures = output.write_profile, [1]

    def write_profile(profile, fmt, name, plugins, session_id, fallback=False):
        if failures[0]:
            failures[0] -= 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(profile, fmt, name, plugins, session_id, fallback)

    monkeypatch.setattr(output, "write_profile", write_profile)
    sid = proton.start(str(tmp_path / "run"), backend="fake")
    windows = Windows()
    windows.idle()
    windows.start()
    with proton.scope("first"):
        fake.launch("k")
    said = windows.stop()
    assert said == (f"session {sid} '{tmp_path}/run' idle; window 1 (phase 1) could not be written yet: kept in "
                    "memory, written at the next stop or at exit")
    assert not (tmp_path / "run.part_1.hatchet").exists()
    windows.start()
    with proton.scope("second"):
        fake.launch("k")
    said = windows.stop()
    first, second = tmp_path / "run.part_1.hatchet", tmp_path / "run.part_2.hatchet"
    assert said == f"session {sid} '{tmp_path}/run' idle; window 2 written to {first}, {second}"
    assert kernels(first, "first", "k") == 1 and kernels(second, "second", "k") == 1


def test_a_window_kept_at_the_end_goes_into_the_session_file(tmp_path, fake, monkeypatch):
    real = output.write_profile
    monkeypatch.setattr(output, "write_profile", lambda profile, fmt, name, *rest: real(profile, fmt, name, *rest)
                        if not name.endswith(".part_1") else (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    sid = proton.start(str(tmp_path / "run"), backend="fake")
    windows = Windows()
    windows.idle()
    windows.start()
    with proton.scope("kept"):
        fake.launch("k")
    assert "could not be written yet" in windows.stop()
    proton.finalize(sid)
    assert kernels(tmp_path / "run.hatchet", "kept", "k") == 1


def test_a_session_the_program_opens_later_joins_as_it_stands(tmp_path, fake):
    windows = Windows()
    windows.idle()  # nothing open yet
    sid = proton.start(str(tmp_path / "late"), backend="fake")
    assert windows.status().startswith("recording window 1 since ")
    with proton.scope("s"):
        fake.launch("k")
    windows.stop()
    assert kernels(tmp_path / "late.part_0.hatchet", "s", "k") == 1
