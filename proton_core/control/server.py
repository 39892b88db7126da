"""The control socket of one process: made by :func:`serve`, answered by one daemon thread.

The thread blocks in ``accept()``: while no one asks, it costs nothing (no polling, no timer, no wakeup).
Each connection is served in turn: the peer's uid is checked, one request line read (bounded in size and
time), one line answered.  Nothing a peer sends can end the thread or the job: any error becomes that
one line.  The socket is bound under a temporary name, made 0600, listening, and only then renamed to
``<pid>.sock``, so a socket file that refuses connections is always a stale one.  It is removed at exit,
and closed in a forked child (which has no sessions, and must not hold the parent's socket open).
"""

from __future__ import annotations

import atexit
import os
import shlex
import socket
import threading
import time

from .. import log
from ..errors import ProtonError
from . import credentials, location, protocol, run_id
from .windows import WINDOWS

ENV_ON_DEMAND = "PROTON_ON_DEMAND"
#: Connections waiting while one is served.
BACKLOG = 16
#: Seconds before accepting again after accept() failed on an open socket (no descriptor free, say).
ACCEPT_RETRY = 0.5


def on_demand() -> bool:
    """Whether this process was asked to record on demand (``PROTON_ON_DEMAND=1``)."""
    return os.environ.get(ENV_ON_DEMAND, "").strip().lower() in ("1", "true", "yes", "on")


class Listener:
    """A bound, listening control socket and the thread that answers it."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.path = ""
        self.sock: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.pid = os.getpid()

    def bind(self) -> None:
        """Make the socket at ``<run dir>/<pid>.sock``; ProtonError (one line) where that cannot be done."""
        for attempt in range(3):  # another process may remove the (empty) run directory between our steps
            directory = location.run_directory(self.run, create=True)
            location.sweep(directory)
            final = os.path.join(directory, f"{self.pid}{location.SUFFIX}")
            temporary = os.path.join(directory, f".{self.pid}.{os.urandom(3).hex()}.tmp")
            if location.too_long(temporary):
                raise ProtonError(f"the control socket path {final} is too long for a Unix socket; "
                                  f"set {location.ENV_DIR} to a shorter directory")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(temporary)
                os.chmod(temporary, 0o600)
                sock.listen(BACKLOG)
                sock.settimeout(None)  # blocking accept, whatever socket.setdefaulttimeout() says
                os.replace(temporary, final)  # our own pid's file can only be a stale one
            except FileNotFoundError:
                sock.close()
                if attempt == 2:
                    raise
                continue
            except BaseException:
                sock.close()
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
                raise
            self.sock, self.path = sock, final
            return

    def start(self) -> None:
        self.thread = threading.Thread(target=self._serve, name="proton-control", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        sock = self.sock
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                if self.sock is None:  # closed: at exit
                    return
                time.sleep(ACCEPT_RETRY)  # out of descriptors or memory for a moment: never spin, never give up
                continue
            try:
                with conn:
                    conn.settimeout(protocol.READ_TIMEOUT)
                    self._answer(conn)
            except Exception:  # the peer went away mid-answer: nothing to tell anyone
                pass

    def _answer(self, conn: socket.socket) -> None:
        ok, why = credentials.admitted(conn)
        if not ok:
            conn.sendall(protocol.reply_line(protocol.ERROR, why))
            return
        try:
            command = protocol.read_request(conn)
            text = getattr(WINDOWS, command)()
            status = protocol.OK
        except protocol.BadRequest as exc:
            status, text = protocol.ERROR, str(exc)
        except ProtonError as exc:
            status, text = protocol.ERROR, str(exc)
        except Exception as exc:  # a bug of ours must not end the job, nor the listener
            status, text = protocol.ERROR, f"internal error: {type(exc).__name__}: {exc}"
        conn.sendall(protocol.reply_line(status, text))

    def close(self) -> None:
        """Stop answering and remove the socket file (only the process that made it removes it)."""
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread's accept()
            except OSError:
                pass
            sock.close()
        if self.path and os.getpid() == self.pid:
            location.remove(self.path)
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)

    def forget_in_child(self) -> None:
        """In a forked child: close the inherited descriptor, leave the parent's file alone."""
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


_lock = threading.Lock()
LISTENER: Listener | None = None


def serve() -> str | None:
    """Serve on-demand control for this process, when ``PROTON_ON_DEMAND`` asks for it; the socket's path.

    Call it right after the session starts (``proton-profile --on-demand`` does, in every process it
    profiles).  The open sessions go idle; ``proton-profile ctl start`` starts recording.  Without
    ``PROTON_ON_DEMAND`` it does nothing: no thread, no socket.  Where the socket cannot be made (a control
    directory that is not private, a path too long) one line says why and the sessions keep recording
    the whole run, so no data is lost.  Calling it again returns the same socket.
    """
    global LISTENER
    if not on_demand():
        return None
    from ..manager import MANAGER

    with _lock:
        if LISTENER is not None and LISTENER.pid == os.getpid() and LISTENER.sock is not None:
            return LISTENER.path
        if not any(not s.closed for s in MANAGER.sessions.values()):
            return None  # nothing to control: this process records nothing (not a profiled rank)
        run = run_id.current()
        listener = Listener(run)
        try:
            listener.bind()
        except (ProtonError, OSError) as exc:
            reason = str(exc) if isinstance(exc, ProtonError) else f"{exc.strerror or exc} ({exc.filename or ''})"
            log.warn(f"on-demand control is off in pid {os.getpid()}: {reason}; recording the whole run instead")
            return None
        WINDOWS.run = run
        WINDOWS.idle()
        listener.start()
        LISTENER = listener
        atexit.register(_close_at_exit)
    others = [pid for pid, _ in location.sockets(os.path.dirname(listener.path)) if pid != os.getpid()]
    if not others:  # one line per job, not one per rank
        log.warn(f"recording on demand, idle now: proton-profile ctl start --run {shlex.quote(run)} "
                 f"(or --pid {os.getpid()})")
    return listener.path


def _close_at_exit() -> None:
    """Before the sessions are written at exit (exit handlers run last-registered first): no command races the
    final write, and no socket file is left behind."""
    listener = LISTENER
    if listener is not None and listener.pid == os.getpid():
        listener.close()


def _after_fork_in_child() -> None:
    global LISTENER
    listener, LISTENER = LISTENER, None
    if listener is not None:
        listener.forget_in_child()
    WINDOWS.records.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
