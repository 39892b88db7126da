"""Phases that end at N launches however fast they come (``periodic_flushing:launches=N``).

The periodic writer's poll sees launch counts only at each flush, so a burst faster than the poll
used to land in one part.  Where the backend can count launches itself (``Backend.switch_epochs``:
the cupti recorder, the synthetic backend), the manager reserves a block of epoch numbers after the
current one and the backend moves on to the next after every N launches.  The core learns of each
switch later (the backend's ``current_epoch`` at a flush or poll, or a record carrying the epoch) and
only then opens the session's next phase and binds the epoch to it: every record of such an epoch is
routed after that, so none is lost, and the phases end where the launches said.

One session per backend switches this way (the first with ``launches=``); the others on the same
backend still end phases at the poll.  A spent block (more switches than reserved between two polls)
falls back to the poll until the next phase end reserves a new one.
"""

from __future__ import annotations

import time

#: Epoch numbers reserved per block: switches the backend may make between two of the core's polls.
RESERVED = 64


class Switching:
    """One armed block: the epochs ``base+1 .. last`` the backend may move into, bound as they come."""

    def __init__(self, session, members: tuple, base: int, last: int) -> None:
        self.session = session  # the session whose phases advance at each switch
        self.members = members  # every session listening on the backend (their records follow the epoch)
        self.bound = base  # epochs up to this one are bound to phases
        self.last = last


def arm(state, members: tuple) -> None:
    """After ``set_epoch(state.epoch)``: reserve a block for the first member that ends phases by launch
    count, if the backend can switch by itself; ``state.switching`` says what is armed."""
    state.switching = None
    for session in members:
        writer = getattr(session, "writer", None)
        every = writer.options.launches if writer is not None else None
        if every:
            last = state.epoch + RESERVED
            if state.backend.switch_epochs(every, last):
                state.switching = Switching(session, members, state.epoch, last)
                state.epoch = last  # never handed out again
            return


def follow(state, upto: int | None = None) -> None:
    """Bind the epochs the backend moved into (up to ``upto``, default: where it is now) to new phases."""
    switching = state.switching
    if switching is None:
        return
    if upto is None:
        upto = state.backend.current_epoch()
    upto = min(upto, switching.last)
    if upto <= switching.bound:
        return
    session = switching.session
    while switching.bound < upto:
        switching.bound += 1
        if not session.closed:
            session.end_phase()
        state.epochs[switching.bound] = tuple((s, s.phases.current) for s in switching.members)
    if session.writer is not None:
        session.writer.phase_started = time.monotonic()
    state.backend.phase_ended()


def live_epoch(state) -> int:
    """The newest epoch bound to phases: what a flush starting now retires everything before."""
    switching = state.switching
    return state.epoch if switching is None else switching.bound
