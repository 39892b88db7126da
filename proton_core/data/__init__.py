"""Profile data by phase: upstream Proton's ``proton.data`` API.

``proton.data.get/advance_phase/is_phase_complete/clear`` take upstream
Proton's names and arguments: a long run splits its data into phases, reads
or writes each one when it is complete, and frees it.

This package sits above the sessions it reads (it imports the manager; nothing
below imports it).  The model types live in :mod:`proton_core.model`;
``Profile``, ``Trace`` and ``Tree`` are named here too, as they always were.
"""

from __future__ import annotations

from ..manager import MANAGER
from ..model import Profile, Trace, Tree

__all__ = ["Profile", "Trace", "Tree", "get", "get_msgpack", "advance_phase", "is_phase_complete", "clear"]


def get(session: int | None = 0, phase: int = 0):
    """One phase's data as hatchet JSON (``[root, device_info]``); None when ``session`` is None."""
    if session is None:
        return None
    from ..formats import hatchet  # here: json and the format load only for programs that read phases

    return hatchet.document(MANAGER.phase_profile(session, phase))


def get_msgpack(session: int | None = 0, phase: int = 0) -> bytes | None:
    """``get``'s document as MessagePack bytes (upstream's ``get_msgpack``: ``msgpack.loads`` gives ``get``'s
    value back); None when ``session`` is None."""
    if session is None:
        return None
    from ..formats import msgpack_io

    return msgpack_io.packb(get(session, phase))


def advance_phase(session: int | None = 0) -> int | None:
    """Close the session's current phase; returns the number of the phase that starts now.  Under a step
    schedule (``PROTON_SCHEDULE``) it is one step of it, as ``proton.step()``."""
    if session is None:
        return None
    from ..distributed import schedule

    if schedule.armed(session) and schedule.step(session) is not None:
        return MANAGER.sessions[session].phases.current
    return MANAGER.advance_phase(session)


def is_phase_complete(session: int | None = 0, phase: int = 0) -> bool:
    """Whether every kernel launched during ``phase`` has been delivered (safe to read and clear)."""
    return False if session is None else MANAGER.is_phase_complete(session, phase)


def clear(session: int | None = 0, phase: int = 0, clear_up_to_phase: bool = False) -> None:
    """Free one phase's data (or every phase up to it)."""
    if session is not None:
        MANAGER.clear_phase(session, phase, clear_up_to_phase)
