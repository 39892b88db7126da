"""Where a profile goes: checked before the program runs, never over a file this job wrote, a fallback at exit.

* :func:`check` fails in one line, at ``start()``, for a directory that does not
  exist or cannot be written, a name that is a directory, or a name longer than
  the file system allows, so a run never ends with its profile lost.
* :func:`claim` picks the file a session writes.  A file this process (or the
  parent it was forked from) wrote, or that another live process has claimed,
  is never replaced: the session writes ``<name>.1.<ext>`` (``.2``, ...)
  instead and one line says so.  A file left by an earlier run is replaced.
  Other processes' claims are files ``<tmpdir>/proton-claims-<uid>/<hash>``
  created atomically (a hard link, else ``O_CREAT | O_EXCL``) holding the
  claimant's pid, honoured while that pid is alive; a process removes its own
  at exit, and the first claim of a process sweeps those of dead ones.
* Where the job's launcher gives this process a rank (torchrun, Slurm, MPI), the name gets
  ``.rank<k>`` first (:mod:`proton_core.distributed.naming`): no two ranks of a job share a file.
* :func:`fallback_path` is a unique file in the temporary directory, for a
  write that fails at exit after all (the disk filled, the directory vanished).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import tempfile
import threading

from . import log
from .distributed import naming
from .errors import ProtonError

_lock = threading.Lock()
#: Absolute paths this process wrote (a forked child inherits them with its memory).
_written: set[str] = set()
#: claim file -> the pid that made it (only our own are removed at exit).
_claims: dict[str, int] = {}
_cleanup_installed = False


def name_max(directory: str) -> int:
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check(path: str) -> None:
    """Raise a one-line ProtonError where ``path`` cannot be written (it need not exist yet)."""
    full = os.path.abspath(path)
    directory, base = os.path.split(full)
    if os.path.isdir(full):
        raise ProtonError(f"cannot write the profile to {full}: it is a directory (give a file name)")
    if not os.path.exists(directory):
        raise ProtonError(f"cannot write the profile to {full}: the directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise ProtonError(f"cannot write the profile to {full}: {directory} is not a directory")
    limit = name_max(directory)
    if len(os.fsencode(base)) > limit:
        raise ProtonError(f"cannot write the profile to {full}: the file name is {len(os.fsencode(base))} bytes, "
                          f"over the file system's limit of {limit}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ProtonError(f"cannot write the profile to {full}: the directory {directory} is not writable")


def numbered(name: str, extension: str, number: int) -> str:
    """``train`` -> ``train.1`` and ``train.hatchet`` -> ``train.1.hatchet`` (the sink adds a missing extension)."""
    suffix = "." + extension
    if name.endswith(suffix):
        return f"{name[: -len(suffix)]}.{number}{suffix}"
    return f"{name}.{number}"


def with_extension(name: str, extension: str) -> str:
    return name if name.endswith("." + extension) else f"{name}.{extension}"


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def claims_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    directory = os.path.join(tempfile.gettempdir(), f"proton-claims-{uid}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory


def claim_file(path: str) -> str:
    digest = hashlib.sha1(os.fsencode(os.path.abspath(path))).hexdigest()[:32]
    return os.path.join(claims_dir(), digest)


def _holder(claim: str) -> int:
    """The pid that holds ``claim``, or 0 where it is stale or unreadable."""
    try:
        with open(claim) as f:
            text = f.read().strip()
    except OSError:
        return 0
    try:
        return int(text)
    except ValueError:
        return 0


def _try_claim(path: str) -> str | None:
    """Take ``path`` for this process; None where another live process holds it."""
    try:
        claim = claim_file(path)
    except OSError:
        return "unclaimed"  # no temporary directory: the registry of this process still applies
    pid = os.getpid()
    for _ in range(3):
        try:
            made = _create(claim, pid)
        except OSError:
            return "unclaimed"
        if made:
            _claims[claim] = pid
            _install_cleanup()
            return claim
        holder = _holder(claim)
        if holder == pid:  # ours; or this pid's before it exec'd into this program: that file stays
            return claim if claim in _claims else None
        if alive(holder):
            return None
        try:
            os.unlink(claim)  # a finished run's claim: its file may be replaced
        except FileNotFoundError:
            pass
        except OSError:
            return "unclaimed"
    return None


def _create(claim: str, pid: int) -> bool:
    """Create ``claim`` holding ``pid`` atomically (never seen empty); False where it exists."""
    new = f"{claim}.{pid}.new"
    with open(new, "w") as f:
        f.write(str(pid))
    try:
        os.link(new, claim)  # atomic and complete: a reader never sees a claim without its pid
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here: O_EXCL, with a moment where the claim is empty
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(str(pid))
        return True
    finally:
        os.unlink(new)


def taken_by_us(name: str, path: str) -> bool:
    """Whether this process (or the parent it was forked from) wrote ``path`` or periodic parts of ``name``."""
    parts = os.path.abspath(name) + ".part_"
    return os.path.abspath(path) in _written or any(w.startswith(parts) for w in _written)


def claim(name: str, extension: str, continuing: bool = False) -> str:
    """The name a session writes under: ``name``, or a numbered one where ``name``'s file is this job's already.

    ``continuing``: the session goes on with a profile this process wrote (``proton.profile``'s later
    calls), so replacing its own file is what is asked; other processes' claims still hold.
    """
    name = naming.at_start(name, extension)  # a rank of a job writes its own file
    with _lock:
        candidate, number, why = name, 0, ""
        while True:
            path = with_extension(candidate, extension)
            if not continuing and taken_by_us(candidate, path):
                why = why or "was written earlier by this program"
            elif _try_claim(path) is not None:
                break
            else:
                why = why or exec_or_other(path)
            number += 1
            candidate = numbered(name, extension, number)
        if candidate != name:
            log.warn(f"{os.path.abspath(with_extension(name, extension))} {why}: this session writes "
                     f"{os.path.abspath(path)} instead (no profile of this job is replaced)")
        return candidate


def exec_or_other(path: str) -> str:
    """Why ``path`` is held by someone else: this process before it exec'd, or another running process."""
    try:
        mine = _holder(claim_file(path)) == os.getpid()
    except OSError:
        mine = False
    if mine and not os.path.exists(path):
        return "was claimed by this process before it became this program (exec), and never written"
    return ("was written by this process before it became this program (exec)" if mine
            else "is being written by another running process of this job")


def written(path: str) -> None:
    """Record that this process wrote ``path`` (never replaced again by this process or its children)."""
    with _lock:
        _written.add(os.path.abspath(path))


def fallback_path(path: str) -> str:
    """A new, unique file in the temporary directory named after ``path``."""
    base = os.path.basename(path) or "proton"
    stem, dot, extension = base.rpartition(".")
    if not dot:
        stem, extension = base, "hatchet"
    stem = stem[:80]
    fd, fallback = tempfile.mkstemp(prefix=f"{stem}.", suffix=f".{extension}")
    os.close(fd)
    return fallback


def release_claims() -> None:
    """Remove the claims this process made (at exit: its files may then be replaced by a later run)."""
    pid = os.getpid()
    for claim, owner in list(_claims.items()):
        if owner != pid:
            continue
        if _holder(claim) == pid:
            try:
                os.unlink(claim)
            except OSError:
                pass
        _claims.pop(claim, None)


def sweep(directory: str, limit: int = 10000) -> None:
    """Remove claims of processes that died without removing them (SIGKILL, ``os._exit``)."""
    try:
        names = os.listdir(directory)[:limit]
    except OSError:
        return
    for name in names:
        claim = os.path.join(directory, name)
        if not alive(_holder(claim)):
            try:
                os.unlink(claim)
            except OSError:
                pass


def _install_cleanup() -> None:
    global _cleanup_installed
    if not _cleanup_installed:
        _cleanup_installed = True
        atexit.register(release_claims)
        try:
            sweep(claims_dir())  # once per process: the directory never grows with dead runs
        except OSError:
            pass


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
