"""``ctl start``/``stop``/``status`` on real processes: each window is a part holding exactly its scopes."""

import os

from proton_core.testing import child_names, load_profile


def names(path):
    return child_names(load_profile(path)[0])


def scope_count(path, name):
    node = [c for c in load_profile(path)[0]["children"] if c["frame"]["name"] == name]
    return node[0]["metrics"]["n"] if node else 0


def test_each_window_is_a_part_with_only_the_scopes_run_inside_it(start_job, ctl):
    job = start_job("train")
    assert not job.active_after_serve  # on demand: idle from the start, recording nothing
    job.set_label("before")
    job.set_label("w1")
    status, out, err = ctl("start", "--pid", job.pid)
    assert status == 0, err
    assert out == [f"pid {job.pid}: session 0 'train' recording window 1 (phase 1)"]
    job.wait_iterations("w1", 5)
    status, out, err = ctl("stop", "--pid", job.pid)
    first = str(job.work / "train.part_1.hatchet")
    assert (status, out) == (0, [f"pid {job.pid}: session 0 'train' idle; window 1 written to {first}"]), err
    job.set_label("between")
    job.set_label("w2")
    assert ctl("start", "--run", "r1")[0] == 0
    job.wait_iterations("w2", 5)
    assert ctl("stop", "--run", "r1")[0] == 0
    second = str(job.work / "train.part_2.hatchet")  # window k is part k: idle time records into no phase
    status, out, err = ctl("status")
    assert out == [f"pid {job.pid}: idle: session 0 'train', 2 windows written: {first}, {second} "
                   f"(run r1, pid {job.pid})"], err
    job.set_label("after")
    job.set_label("w3")
    ctl("start")  # left open: the program's end writes it
    job.wait_iterations("w3", 3)
    status, out, _ = ctl("status")
    assert out[0].startswith(f"pid {job.pid}: recording window 3 since ")
    written = job.finish().split("\n")[0].split()[1:]

    assert names(first) == ["w1"] and scope_count(first, "w1") >= 5
    assert names(second) == ["w2"] and scope_count(second, "w2") >= 5
    final = str(job.work / "train.hatchet")
    assert written == ["train.hatchet"]
    assert names(final) == ["w3"]  # the window open at the end is in the session's file, nothing lost
    files = sorted(p.name for p in job.work.iterdir() if p.suffix == ".hatchet")
    assert files == ["train.hatchet", "train.part_1.hatchet", "train.part_2.hatchet"]


def test_start_and_stop_twice_say_so_and_change_nothing(start_job, ctl):
    job = start_job()
    job.set_label("idle")
    status, out, _ = ctl("stop", "--pid", job.pid)
    assert (status, out) == (0, [f"pid {job.pid}: session 0 'job' was already idle"])
    job.set_label("w")
    ctl("start", "--pid", job.pid)
    job.wait_iterations("w", 2)
    status, out, _ = ctl("start", "--pid", job.pid)
    assert (status, out) == (0, [f"pid {job.pid}: session 0 'job' was already recording"])
    ctl("stop", "--pid", job.pid)
    job.finish()
    assert names(job.work / "job.part_1.hatchet") == ["w"]


def test_an_empty_window_writes_no_file_and_says_so(start_job, ctl):
    job = start_job()
    job.set_label("pause")
    ctl("start")
    job.wait_iterations("pause", 3)
    status, out, _ = ctl("stop")
    assert (status, out) == (0, [f"pid {job.pid}: session 0 'job' idle; window 1 recorded nothing: no file written"])
    job.set_label("w")
    ctl("start")
    job.wait_iterations("w", 2)
    assert ctl("stop")[0] == 0
    assert names(job.work / "job.part_2.hatchet") == ["w"]
    assert not (job.work / "job.part_1.hatchet").exists()


def test_after_finalize_every_command_answers_in_one_line(start_job, ctl):
    job = start_job()
    (job.work / "linger").write_text("")
    (job.work / "quit").write_text("")
    assert job.proc.stdout.readline().startswith("written ")  # finalize ran; the process lives on
    status, out, err = ctl("start", "--pid", job.pid)
    assert (status, out) == (1, [])
    assert err == [f"proton: pid {job.pid}: no open session in pid {job.pid} (finalized, or never started): "
                   "nothing to record"]
    status, out, err = ctl("status", "--pid", job.pid)
    assert status == 0 and out[0].startswith(f"pid {job.pid}: idle: no open session")
    job.finish()


def test_periodic_flushing_sessions_write_their_windows_at_stop(start_job, ctl):
    job = start_job(mode="periodic_flushing:poll=0.05")
    job.set_label("before")
    job.set_label("w1")
    ctl("start")
    job.wait_iterations("w1", 3)
    status, out, err = ctl("stop")
    assert status == 0, err
    part = str(job.work / "job.part_1.hatchet")
    assert out == [f"pid {job.pid}: session 0 'job' idle; window 1 written to {part}"]
    job.set_label("after")
    job.finish()
    assert names(part) == ["w1"]
    # idle time is never written: the parts are the windows and the run's last (empty) phase
    for path in job.work.glob("job.part_*.hatchet"):
        assert "before" not in names(path) and "after" not in names(path)
