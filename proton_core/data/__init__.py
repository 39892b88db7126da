"""Profile data: the aggregated call tree and the optional event trace, and reading it by phase.

``proton.data.get/advance_phase/is_phase_complete/clear`` take upstream
Proton's names and arguments: a long run splits its data into phases, reads
or writes each one when it is complete, and frees it.
"""

from __future__ import annotations

from .profile import Profile
from .trace import Trace
from .tree import Tree

__all__ = ["Profile", "Trace", "Tree", "get", "advance_phase", "is_phase_complete", "clear"]


def _manager():
    from ..session import MANAGER  # the session module imports this package: look it up at call time

    return MANAGER


def get(session: int | None = 0, phase: int = 0):
    """One phase's data as hatchet JSON (``[root, device_info]``); None when ``session`` is None."""
    if session is None:
        return None
    from ..formats import hatchet

    return hatchet.document(_manager().phase_profile(session, phase))


def advance_phase(session: int | None = 0) -> int | None:
    """Close the session's current phase; returns the number of the phase that starts now."""
    return None if session is None else _manager().advance_phase(session)


def is_phase_complete(session: int | None = 0, phase: int = 0) -> bool:
    """Whether every kernel launched during ``phase`` has been delivered (safe to read and clear)."""
    return False if session is None else _manager().is_phase_complete(session, phase)


def clear(session: int | None = 0, phase: int = 0, clear_up_to_phase: bool = False) -> None:
    """Free one phase's data (or every phase up to it)."""
    if session is not None:
        _manager().clear_phase(session, phase, clear_up_to_phase)
