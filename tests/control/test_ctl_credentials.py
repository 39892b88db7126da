"""Only the job's own user controls it: other users are kept out by the directory, the socket's mode and
the peer-credential check (each tested on its own)."""

import os
import select
import shutil
import signal
import socket
import tempfile
import time

import pytest

from proton_core.control import credentials, protocol, server

NOBODY = 65534
#: A world-writable directory (sticky) that the job run as nobody can enter: pytest's are root's, mode 0700.
SHARED = "/dev/shm"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root; "
                             "the credential check is tested through its seam below")


def test_the_kernel_names_the_peer_of_a_connection():
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert credentials.peer_uid(left) == os.geteuid()
        assert credentials.admitted(left) == (True, "")


def test_a_peer_of_another_uid_is_refused_in_one_line_and_nothing_runs(monkeypatch):
    asked = []
    monkeypatch.setattr(credentials, "peer_uid", lambda conn: os.geteuid() + 1)
    monkeypatch.setattr(server.WINDOWS, "start", lambda: asked.append("start") or "started")
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        right.sendall(b"start\n")
        server.Listener("r")._answer(left)
        reply = right.recv(4096).decode()
    assert reply == (f"error refused: uid {os.geteuid() + 1} may not control this job; only its own user "
                     f"(uid {os.geteuid()}) may\n")
    assert asked == []


def test_unreadable_credentials_are_refused(monkeypatch):
    def fail(conn):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(credentials, "peer_uid", fail)
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert credentials.admitted(left) == (False, "refused: the peer's credentials cannot be read "
                                                     "(Operation not supported)")


def _in_child_as(uid: int, action) -> int:
    """Run ``action()`` in a forked child switched to ``uid``; its exit status is action's return value."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            code = action()
        finally:
            os._exit(code)
    return _wait(pid)


def _wait(pid: int, timeout: float = 30.0) -> int:
    """A forked child's exit status; a child stuck for ``timeout`` s (a fork of a threaded test process can
    deadlock) is killed and fails the test rather than hanging the run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"forked child {pid} did not finish within {timeout:g} s")


def _read_line(fd: int, timeout: float = 30.0) -> str:
    ready, _, _ = select.select([fd], [], [], timeout)
    assert ready, f"no word from the forked job within {timeout:g} s"
    return os.read(fd, 4096).decode().strip()


@as_root
def test_another_user_cannot_even_reach_the_socket(start_job, ctl):
    job = start_job()
    job.set_label("a")

    def connect():
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(job.socket)
                sock.sendall(b"start\n")
                return 1  # got in
        except PermissionError:
            return 0  # the 0700 directory kept it out
        except OSError:
            return 2

    assert _in_child_as(NOBODY, connect) == 0
    job.wait_iterations("a", 2)
    status, out, _ = ctl("status", "--pid", job.pid)
    assert status == 0 and "idle: session 0" in out[0]  # nothing started


@as_root
def test_a_user_who_reaches_the_socket_is_refused_by_its_credentials():
    """The job runs as nobody; root, whom no mode stops, connects and is refused by the uid check."""
    if not os.path.isdir(SHARED):
        pytest.skip(f"no {SHARED}: nowhere both users can reach outside pytest's private directories")
    world = tempfile.mkdtemp(prefix="proton-ctl-test-", dir=SHARED)  # removed below
    os.chmod(world, 0o1777)
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the job, as nobody
        code = 1
        try:
            os.close(ready_r)
            os.close(done_w)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            tempfile.tempdir = world
            os.environ.update(PROTON_CTL_DIR=world, PROTON_ON_DEMAND="1", PROTON_RUN_ID="nb", TMPDIR=world)
            import proton_core as proton

            proton.start(os.path.join(world, "job"), backend="host")
            path = server.serve()
            os.write(ready_w, (path or "none").encode() + b"\n")
            os.read(done_r, 1)
            code = 0
        except BaseException as exc:  # say it to the parent, which fails the test with it
            os.write(ready_w, f"failed {exc!r}\n".encode())
        finally:
            os._exit(code)
    try:
        os.close(ready_w)
        os.close(done_r)
        path = _read_line(ready_r)
        assert path.startswith(world), path
        assert os.stat(path).st_uid == NOBODY
        # root passes the directory's and the socket's modes; the server refuses it before reading a byte
        assert protocol.ask(path, "start", 10) == (
            False, f"refused: uid 0 may not control this job; only its own user (uid {NOBODY}) may")

        def status():
            ok, answer = protocol.ask(path, "status", 10)
            unharmed = ok and answer.startswith("idle: session ") and f"'{world}/job', 0 windows" in answer
            return 0 if unharmed else 1  # answers, and idle: root's start did not run

        assert _in_child_as(NOBODY, status) == 0
    finally:
        os.write(done_w, b"x")
        _wait(pid)
        shutil.rmtree(world, ignore_errors=True)


def test_the_listener_socket_is_closed_in_a_forked_child():
    """A forked child (a DataLoader worker) must not keep the parent's socket open: a connection would
    then wait on a process that never answers once the parent is gone."""
    before = server.LISTENER
    listener = server.Listener("r")
    listener.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.LISTENER = listener
        fd = listener.sock.fileno()
        pid = os.fork()
        if pid == 0:
            try:
                os.fstat(fd)
                os._exit(1)  # still open in the child
            except OSError:
                os._exit(0 if server.LISTENER is None else 2)
        assert _wait(pid) == 0
        os.fstat(fd)  # the parent's stays open
    finally:
        listener.sock.close()
        server.LISTENER = before
