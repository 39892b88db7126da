"""The control channel: garbage and oversized requests, idle cost, stale sockets, nothing without the switch."""

import errno
import os
import socket
import stat
import subprocess
import sys
import time

from proton_core.control import location, protocol, server


def raw(path, payload: bytes, timeout=10.0, hang_up=True) -> str:
    """Send ``payload`` as it is (then end the sending side, unless not ``hang_up``) and return the reply
    (a server may refuse the rest of a long payload: fine)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        try:
            sock.sendall(payload)
            if hang_up:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before taking it all
        data = b""
        while True:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return data.decode()


def test_socket_and_directories_are_private(start_job, ctl_dir):
    job = start_job()
    mode = os.stat(job.socket).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    run_dir, top = os.path.dirname(job.socket), os.path.dirname(os.path.dirname(job.socket))
    assert top == os.path.join(ctl_dir, f"proton-ctl-{os.geteuid()}")
    assert os.path.basename(job.socket) == f"{job.pid}.sock" and os.path.basename(run_dir) == "r1"
    for directory in (run_dir, top):
        info = os.stat(directory)
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
    ports = subprocess.run(["cat", f"/proc/{job.pid}/net/tcp", f"/proc/{job.pid}/net/tcp6"], capture_output=True,
                           text=True).stdout
    inodes = {os.readlink(f"/proc/{job.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{job.pid}/fd")}
    listening = [line.split()[9] for line in ports.splitlines()[1:] if line.split()[3] == "0A"]
    assert not any(f"socket:[{inode}]" in inodes for inode in listening)  # no network port


def test_garbage_oversized_and_silent_peers_get_one_line_and_the_job_runs_on(start_job, ctl):
    job = start_job()
    job.set_label("a")
    answers = [
        raw(job.socket, b"\xff\xfe\x00garbage\n"),
        raw(job.socket, b"launch the missiles\n"),
        raw(job.socket, b"x" * (1 << 20)),
        raw(job.socket, b"start" * 100 + b"\n"),
        raw(job.socket, b""),  # connects, sends nothing, hangs up
        raw(job.socket, b"sta", hang_up=False),  # half a command, then silence
    ]
    assert answers[0] == "error request is not text (11 bytes); send one of start, stop, status\n"
    assert answers[1] == "error unknown command 'launch the missiles'; send one of start, stop, status\n"
    assert answers[2] == answers[3] == \
        f"error request too long (over {protocol.MAX_REQUEST} bytes); send one of start, stop, status\n"
    assert answers[4] == "error empty request; send one of start, stop, status and a newline\n"
    assert answers[5] == "error no command within 2 s; send one of start, stop, status and a newline\n"
    for answer in answers:
        assert answer.count("\n") == 1
    job.wait_iterations("a", 3)  # still running
    status, out, _ = ctl("status", "--pid", job.pid)
    assert status == 0 and out[0].startswith(f"pid {job.pid}: idle: session 0 'job', 0 windows written")
    assert raw(job.socket, b"status\n").startswith("ok idle: session 0")
    ctl("start")
    job.set_label("b")
    ctl("stop")
    job.finish()
    assert not os.path.exists(job.socket)  # removed at exit


def _thread_counters(pid: int, tid: int) -> tuple[int, int]:
    """(context switches, CPU clock ticks) of one thread so far."""
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    switches = int(fields["voluntary_ctxt_switches"]) + int(fields["nonvoluntary_ctxt_switches"])
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        after_name = f.read().rsplit(")", 1)[1].split()
    return switches, int(after_name[11]) + int(after_name[12])  # utime, stime


def test_the_idle_listener_never_wakes(start_job):
    job = start_job()
    job.set_label("busy")  # the program runs; the listener waits in accept()
    with open(f"/proc/{job.pid}/task/{job.tid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    before = _thread_counters(job.pid, job.tid)
    time.sleep(1.0)
    after = _thread_counters(job.pid, job.tid)
    assert after == before, f"the listener woke {after[0] - before[0]} times, used {after[1] - before[1]} ticks"
    assert state == "S"  # asleep in the kernel (accept), not running
    # and it does wake for a command: the counters are the thread's
    assert raw(job.socket, b"status\n").startswith("ok ")
    assert _thread_counters(job.pid, job.tid)[0] > after[0]


def test_nothing_is_served_without_the_switch(start_job, ctl_dir, ctl):
    job = start_job(on_demand=False)
    assert job.socket is None and job.tid == 0
    assert job.active_after_serve  # records the whole run, as without control
    job.set_label("all")
    assert not os.path.exists(os.path.join(ctl_dir, f"proton-ctl-{os.geteuid()}"))
    assert os.listdir(f"/proc/{job.pid}/task") and len(os.listdir(f"/proc/{job.pid}/task")) == 1  # one thread
    status, _, err = ctl("status")
    assert status == 2 and err[0].startswith("proton: no process of yours serves profiling control under ")
    job.finish()
    assert "proton-control" not in job.out


def test_a_control_directory_that_is_not_private_keeps_recording_everything(start_job, ctl_dir, ctl):
    top = os.path.join(ctl_dir, f"proton-ctl-{os.geteuid()}")
    os.mkdir(top, 0o755)
    os.chmod(top, 0o755)
    job = start_job()
    assert job.socket is None and job.active_after_serve
    job.set_label("all")
    job.finish()
    assert f"on-demand control is off in pid {job.pid}: {top} is not private (owner uid {os.geteuid()}, " \
           f"mode 0755; wanted uid {os.geteuid()}, mode 0700)" in job.err
    assert job.err.count("\n") == 1  # that one line
    assert "all" in (job.work / "job.hatchet").read_text()
    status, out, err = ctl("status")  # nothing in such a directory is trusted
    assert (status, out) == (2, []) and len(err) == 1 and err[0].startswith(f"proton: ctl: {top} is not private")


def test_a_socket_path_too_long_is_one_line_and_the_run_is_recorded(start_job, tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    job = start_job(env={"PROTON_CTL_DIR": str(deep)})
    assert job.socket is None and job.active_after_serve
    job.set_label("all")
    job.finish()
    assert job.err.startswith(f"proton: on-demand control is off in pid {job.pid}: the control socket path ")
    assert job.err.rstrip().endswith("is too long for a Unix socket; set PROTON_CTL_DIR to a shorter directory; "
                                     "recording the whole run instead")
    assert "all" in (job.work / "job.hatchet").read_text()


def test_accept_failures_are_retried_never_fatal(monkeypatch):
    monkeypatch.setattr(server, "ACCEPT_RETRY", 0.01)
    listener = server.Listener("r")
    calls = []

    class Flaky:
        def accept(self):
            calls.append(1)
            if len(calls) < 3:
                raise OSError(errno.EMFILE, "Too many open files")
            listener.sock = None  # closed at exit: now the thread ends
            raise OSError(errno.EBADF, "Bad file descriptor")

    listener.sock = Flaky()
    listener._serve()
    assert len(calls) == 3


def test_stale_sockets_are_removed(start_job, ctl, ctl_dir):
    job = start_job()
    job.kill()  # SIGKILL: no exit handler removes its socket
    assert os.path.exists(job.socket)
    status, _, err = ctl("status")
    assert status == 2
    assert err[0] == f"proton: pid {job.pid} (run r1) is gone: removed its stale control socket"
    assert not os.path.exists(job.socket) and not os.path.exists(os.path.dirname(job.socket))
    # a socket file of a pid that lives on as another program (pid reuse): nobody listens on it
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = os.path.join(location.run_directory("r2", create=True), f"{other.pid}.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(path)
        status, _, err = ctl("status", "--run", "r2")
        assert status == 1
        assert err == [f"proton: pid {other.pid}: is no longer serving control (its pid belongs to another "
                       "program now): removed its stale socket"]
        assert not os.path.exists(path)
    finally:
        other.kill()
        other.wait()
