"""Real processes under on-demand control: a small job that loops over a labelled scope, and its handle.

The job (``JOB`` below, run with ``python3``) starts a host-backend session, calls
``proton_core.control.serve()`` as ``proton-profile --on-demand`` does, and then opens the scope named in its
``label`` file once per iteration (metric ``n`` = 1), acknowledging each iteration in ``ack``: a test that
sets a label and waits for its acknowledgement knows every later iteration uses it, so what a window
holds is known exactly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

JOB = r'''
import os, sys, threading, time
import proton_core as proton
from proton_core import control
from proton_core.manager import MANAGER

work, name, mode = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else None)
os.chdir(work)
sid = proton.start(name, backend="host", mode=mode)
path = control.serve()
from proton_core.control import server
tid = server.LISTENER.thread.native_id if server.LISTENER is not None else 0
print("ready", os.getpid(), tid, path, int(MANAGER.sessions[sid].active), flush=True)
label, count = "before", 0
while not os.path.exists("quit"):
    try:
        label = open("label").read().strip() or label
    except FileNotFoundError:
        pass
    if label == "pause":  # no scope at all
        time.sleep(0.002)
    else:
        with proton.scope(label, {"n": 1}):
            time.sleep(0.002)
    count += 1
    with open("ack.tmp", "w") as f:
        f.write(f"{label} {count}")
    os.replace("ack.tmp", "ack")
print("written", " ".join(proton.finalize()), flush=True)
print("threads", ",".join(t.name for t in threading.enumerate()), flush=True)
while os.path.exists("linger") and not os.path.exists("gone"):  # alive after finalize, until told
    time.sleep(0.01)
'''


class Job:
    """One job process: its pid, the listener thread's id, its socket, and the label handshake."""

    def __init__(self, work, name, env, mode=None, program=JOB):
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        script = work / "job.py"
        script.write_text(program)
        args = [sys.executable, str(script), str(work), name] + ([mode] if mode else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "ready":
            self.proc.kill()
            raise AssertionError(f"job did not start: {line} {self.proc.stderr.read()}")
        self.pid, self.tid = int(line[1]), int(line[2])
        self.socket = None if line[3] == "None" else line[3]
        self.active_after_serve = line[4] == "1"
        self.out = ""
        self.err = ""

    def iterations(self) -> tuple[str, int]:
        try:
            label, count = (self.work / "ack").read_text().split()
            return label, int(count)
        except (FileNotFoundError, ValueError):
            return "", 0

    def set_label(self, label: str, timeout: float = 20.0) -> int:
        """Make every iteration from now on use ``label``; returns once two have run with it."""
        tmp = self.work / "label.tmp"
        tmp.write_text(label)
        os.replace(tmp, self.work / "label")
        return self.wait_iterations(label, 2, timeout)

    def wait_iterations(self, label: str, more: int, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        first = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"job ended: {self.proc.stderr.read()}"
            seen, count = self.iterations()
            if seen == label:
                first = count if first is None else first
                if count - first >= more:
                    return count
            time.sleep(0.005)
        raise AssertionError(f"job did not run {more} iterations of {label!r}: {self.iterations()}")

    def finish(self, timeout: float = 30.0) -> str:
        (self.work / "quit").write_text("")
        (self.work / "gone").write_text("")
        self.out, self.err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, self.err
        return self.out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.communicate()


@pytest.fixture
def job_program():
    """The job's script (:data:`JOB`), for tests that run a variant of it."""
    return JOB


@pytest.fixture
def ctl_dir(monkeypatch):
    """A short, private base directory for control sockets (socket paths are limited to 107 bytes)."""
    base = tempfile.mkdtemp(prefix="c")
    monkeypatch.setenv("PROTON_CTL_DIR", base)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    yield base


@pytest.fixture
def start_job(tmp_path, ctl_dir):
    """``start_job(name, run=..., on_demand=True, mode=None, env=None, program=JOB)`` -> a running :class:`Job`
    (``program``: another job script with JOB's handshake); all killed after."""
    jobs = []

    def start(name="job", run="r1", on_demand=True, mode=None, env=None, program=JOB):
        environment = {k: v for k, v in os.environ.items()
                       if k not in ("PROTON_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PROTON_ON_DEMAND")}
        environment.update({"PROTON_CTL_DIR": ctl_dir, "PYTHONUNBUFFERED": "1"})
        if run is not None:
            environment["PROTON_RUN_ID"] = run
        if on_demand:
            environment["PROTON_ON_DEMAND"] = "1"
        environment.update(env or {})
        job = Job(tmp_path / f"{name}-{len(jobs)}", name, environment, mode, program)
        jobs.append(job)
        return job

    yield start
    for job in jobs:
        job.kill()


@pytest.fixture
def ctl(capsys):
    """``ctl("start", "--pid", 12)`` -> (exit status, stdout lines, stderr lines) of ``proton-profile ctl``."""
    from proton_core.control.cli import main

    def run(*argv):
        capsys.readouterr()
        status = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return status, out.splitlines(), err.splitlines()

    return run
