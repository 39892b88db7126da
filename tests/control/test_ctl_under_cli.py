"""``proton-profile --on-demand`` end to end: the CLI's program and the ranks it follows serve control, and
``proton-profile ctl`` reaches them all by the run id (needs the CLI's ``--on-demand``, issue 45 item 2)."""

import os
import subprocess
import sys
import time

import pytest

from proton_core import cli
from proton_core.testing import child_names, load_profile

pytestmark = pytest.mark.skipif("--on-demand" not in getattr(cli, "USAGE", ""),
                                reason="this proton-profile has no --on-demand (the launcher's part of issue 45)")

PROGRAM = """
import os, time
import proton_core as proton
label = "before"
while not os.path.exists("quit"):
    if os.path.exists("label"):
        label = open("label").read().strip() or label
    with proton.scope(label, {"n": 1}):
        time.sleep(0.005)
    open(f"ack{os.environ['RANK']}", "w").write(label)
"""


def ctl(*argv, env):
    done = subprocess.run([sys.executable, "-m", "proton_core", "ctl", *argv], capture_output=True, text=True,
                          env=env, timeout=60)
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def wait_for(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def set_label(work, label):
    (work / "label.tmp").write_text(label)
    os.replace(work / "label.tmp", work / "label")
    for rank in (0, 1):  # every rank has finished an iteration with it
        path = work / f"ack{rank}"
        wait_for(lambda: path.exists() and path.read_text() == label, f"rank {rank} never ran {label!r}")
        os.unlink(path)
        wait_for(lambda: path.exists() and path.read_text() == label, f"rank {rank} never ran {label!r}")


def test_two_ranks_under_the_cli_start_and_stop_together(tmp_path, ctl_dir):
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("PROTON_RUN_ID", "PROTON_ON_DEMAND")}
    env.update(PROTON_CTL_DIR=ctl_dir, PROTON_RUN_ID="clirun")
    command = (f"RANK=0 WORLD_SIZE=2 {sys.executable} prog.py & RANK=1 WORLD_SIZE=2 {sys.executable} prog.py; wait")
    job = subprocess.Popen([sys.executable, "-m", "proton_core", "--on-demand", "-b", "host", "-n", "job",
                            "bash", "-c", command], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        run_dir = os.path.join(ctl_dir, f"proton-ctl-{os.geteuid()}", "clirun")
        wait_for(lambda: os.path.isdir(run_dir) and len(os.listdir(run_dir)) == 2, "two ranks serving control")
        set_label(tmp_path, "idle")
        set_label(tmp_path, "window")
        status, out, err = ctl("start", "--run", "clirun", env=env)
        assert status == 0 and len(out) == 2, err
        set_label(tmp_path, "window")
        status, out, err = ctl("stop", "--run", "clirun", env=env)
        assert status == 0 and sorted(line.split(" written to ")[1] for line in out) == \
            [str(tmp_path / "job.rank0.part_1.hatchet"), str(tmp_path / "job.rank1.part_1.hatchet")], err
        set_label(tmp_path, "after")
        (tmp_path / "quit").write_text("")
        _, stderr = job.communicate(timeout=60)
        assert job.returncode == 0, stderr
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    for rank in (0, 1):
        assert child_names(load_profile(tmp_path / f"job.rank{rank}.part_1.hatchet")[0]) == ["window"]
        assert child_names(load_profile(tmp_path / f"job.rank{rank}.hatchet")[0]) == []
    assert not os.path.exists(run_dir)  # every socket removed at exit
