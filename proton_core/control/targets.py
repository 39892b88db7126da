"""Which processes a ``ctl`` command goes to: one pid, every process of one run, or every one of this user.

Each process that serves control has a socket file named for its pid in its run's directory
(:mod:`proton_core.control.location`).  Looking them up also cleans up after processes that are gone:
their stale sockets are removed, and each removal is told in one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ProtonError
from . import location, run_id


@dataclass(frozen=True)
class Target:
    pid: int
    run: str  # the run directory's name (the run id, where it is plain and short)
    path: str


def _in_run(name: str, notes: list[str]) -> list[Target]:
    directory = os.path.join(location.root(), name)
    for pid in location.sweep(directory):
        notes.append(f"pid {pid} (run {name}) is gone: removed its stale control socket")
    return [Target(pid, name, path) for pid, path in location.sockets(directory)]


def find(pid: int | None = None, run: str | None = None) -> tuple[list[Target], list[str]]:
    """(the processes to ask, lines about stale sockets removed on the way); ProtonError where the
    control directory is not private (nothing in it is trusted then)."""
    notes: list[str] = []
    try:
        if run is not None:
            name = run_id.directory_name(run)
            return (_in_run(name, notes) if name in location.runs_present() else []), notes
        found = [t for name in location.runs_present() for t in _in_run(name, notes)]
    except OSError as exc:
        raise ProtonError(f"cannot read the control directory {location.root()}: {exc.strerror or exc}") from None
    if pid is not None:
        found = [t for t in found if t.pid == pid]
    return found, notes


def nothing_found(pid: int | None, run: str | None) -> str:
    """The one line said when no process answers to the target."""
    where = f"under {location.root()}"
    hint = "start it with proton-profile --on-demand (or PROTON_ON_DEMAND=1), as the same user"
    if pid is not None:
        return f"pid {pid} serves no profiling control {where}: {hint}"
    if run is not None:
        return f"no process of run {run!r} serves profiling control {where}: {hint}"
    return f"no process of yours serves profiling control {where}: {hint}"
