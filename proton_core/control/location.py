"""Where control sockets live: a private directory per user, a directory per run, a socket per pid.

``<base>/proton-ctl-<uid>/<run>/<pid>.sock``, where ``<base>`` is ``PROTON_CTL_DIR``, else
``$XDG_RUNTIME_DIR`` (per user, on the machine's own file system, emptied at logout), else the temporary
directory.  Both directories are mode 0700 and must belong to this user: one that does not, or that
others may enter, is refused (never repaired: someone else could have put a link there first), so no
other user can reach a socket, nor plant one where ``ctl`` would look.  A socket whose process is gone is
*stale*: :func:`sweep` removes it.
"""

from __future__ import annotations

import os
import stat
import tempfile

from ..errors import ProtonError
from . import run_id as runs

ENV_DIR = "PROTON_CTL_DIR"
SUFFIX = ".sock"
#: sun_path holds 108 bytes with its terminating NUL.
MAX_SOCKET_PATH = 107


def base_directory() -> str:
    """The directory the per-user control directory goes in."""
    chosen = os.environ.get(ENV_DIR, "").strip()
    if chosen:
        return os.path.abspath(chosen)
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        return runtime
    return tempfile.gettempdir()


def root() -> str:
    """This user's control directory (not created)."""
    return os.path.join(base_directory(), f"proton-ctl-{os.geteuid()}")


def check_private(path: str) -> None:
    """A ProtonError unless ``path`` is a real directory (no link) of this user that nobody else may enter."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ProtonError(f"{path} is not a directory: remove it or set {ENV_DIR} to another place")
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ProtonError(f"{path} is not private (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}; "
                          f"wanted uid {os.geteuid()}, mode 0700): remove it or set {ENV_DIR} to another place")


def private_directory(path: str) -> str:
    """Make ``path`` (mode 0700) unless it exists, then check it is private; returns it."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    check_private(path)
    return path


def run_directory(run: str, create: bool = False) -> str:
    """The directory of run ``run`` (made, private, with ``create``)."""
    top = root()
    path = os.path.join(top, runs.directory_name(run))
    if create:
        private_directory(top)
        private_directory(path)
    return path


def socket_path(run: str, pid: int | None = None) -> str:
    return os.path.join(run_directory(run), f"{os.getpid() if pid is None else pid}{SUFFIX}")


def too_long(path: str) -> bool:
    return len(os.fsencode(path)) > MAX_SOCKET_PATH


def pid_of(file_name: str) -> int | None:
    """The pid a socket file is named for, None for any other file."""
    stem, suffix = file_name[:-len(SUFFIX)], file_name[-len(SUFFIX):]
    return int(stem) if suffix == SUFFIX and stem.isdigit() else None


def alive(pid: int) -> bool:
    """Whether a process of this user runs with ``pid`` (one of another user under that pid is not ours:
    the socket's own process is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # it exists but is another user's: our process of that pid is gone
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except FileNotFoundError:  # exited just now, or a system without /proc, where kill(0) answered
        return not os.path.isdir("/proc/self")
    except OSError:
        return True


def runs_present() -> list[str]:
    """Names of the run directories of this user (none when the control directory does not exist)."""
    top = root()
    try:
        check_private(top)
        return sorted(name for name in os.listdir(top) if os.path.isdir(os.path.join(top, name)))
    except FileNotFoundError:
        return []


def sockets(directory: str) -> list[tuple[int, str]]:
    """(pid, path) of the socket files in a run directory, by pid."""
    try:
        check_private(directory)
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(pid_of(name), os.path.join(directory, name)) for name in names]
    return sorted((pid, path) for pid, path in found if pid is not None)


def remove(path: str) -> None:
    """Remove a socket file, and its run directory once empty (another process may race us: fine)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    try:
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass  # not empty, or already gone


def sweep(directory: str) -> list[int]:
    """Remove the sockets of processes that are gone; returns their pids."""
    gone = []
    for pid, path in sockets(directory):
        if pid != os.getpid() and not alive(pid):
            remove(path)
            gone.append(pid)
    return gone
