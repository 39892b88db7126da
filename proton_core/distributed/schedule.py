"""Which steps are recorded: a schedule in the spirit of ``torch.profiler.schedule``, driven by ``proton.step()``.

``PROTON_SCHEDULE`` (``proton-profile --schedule``) is ``skip_first=S,wait=W,warmup=U,active=A,repeat=R``
(any subset; defaults 0,0,0,1,0; ``repeat=0``: cycles forever).  The program calls ``proton.step()`` at the
end of each step.  After ``skip_first`` steps each cycle is ``wait`` + ``warmup`` + ``active`` steps: the
session records only during the ``active`` ones (it is deactivated otherwise, which costs nothing), and
each active window ends with a phase boundary, so it is its own phase: one part
``<name>.part_<N>`` under ``mode=periodic_flushing``, the windows summed in one file otherwise.  Warm-up
steps run unrecorded like waiting ones: activating a session needs no warm-up (the backend is attached
when the session starts), they are accepted so schedules written for torch carry over.

A schedule is armed when the session starts under ``proton-profile``; a program that starts its own
session gets it at its first ``proton.step()``, what it recorded before that kept only where step 0 is
an active step.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ..errors import ProtonError
from ..manager import MANAGER
from . import identity

ENV_VAR = "PROTON_SCHEDULE"
FIELDS = ("skip_first", "wait", "warmup", "active", "repeat")


@dataclass(frozen=True)
class Schedule:
    skip_first: int = 0
    wait: int = 0
    warmup: int = 0
    active: int = 1
    repeat: int = 0

    def window(self, step: int) -> int | None:
        """The active window ``step`` records in (0, 1, ...), or None where it is not recorded."""
        if step < self.skip_first:
            return None
        cycle_length = self.wait + self.warmup + self.active
        cycle, position = divmod(step - self.skip_first, cycle_length)
        if self.repeat and cycle >= self.repeat:
            return None
        return cycle if position >= self.wait + self.warmup else None


def parse(text: str) -> Schedule:
    """``"wait=1,active=2"`` (commas or colons) -> Schedule; a one-line ProtonError for anything else."""
    values: dict[str, int] = {}
    for item in str(text).replace(":", ",").split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in FIELDS:
            raise ProtonError(f"schedule {text!r}: {item!r} is not one of {', '.join(f + '=N' for f in FIELDS)}")
        try:
            values[key] = int(value)
        except ValueError:
            raise ProtonError(f"schedule {text!r}: {key} must be a whole number, not {value.strip()!r}") from None
        if values[key] < 0:
            raise ProtonError(f"schedule {text!r}: {key} must not be negative")
    schedule = Schedule(**values)
    if schedule.active < 1:
        raise ProtonError(f"schedule {text!r}: active must be at least 1 (the steps recorded)")
    return schedule


class Stepper:
    """One session's place in its schedule."""

    def __init__(self, session_id: int, schedule: Schedule, step: int = 0) -> None:
        self.session_id, self.schedule, self.step = session_id, schedule, step
        self.lock = threading.Lock()

    def enter(self) -> None:
        """Set the session's recording for the step it is in now."""
        MANAGER.set_active(self.session_id, self.schedule.window(self.step) is not None)

    def advance(self) -> int:
        """The current step ended: close its window where that ends, record or not in the next step."""
        with self.lock:
            before = self.schedule.window(self.step)
            self.step += 1
            after = self.schedule.window(self.step)
            if before is not None and before != after:
                MANAGER.advance_phase(self.session_id)  # the window is one phase: written as a part of its own
            if (before is None) != (after is None):
                MANAGER.set_active(self.session_id, after is not None)
            return self.step


_steppers: dict[int, Stepper] = {}
_lock = threading.Lock()


def arm(session_id: int, schedule: Schedule) -> Stepper:
    """Give ``session_id`` the schedule from step 0 (its start)."""
    stepper = Stepper(session_id, schedule)
    with _lock:
        _steppers[session_id] = stepper
    stepper.enter()
    return stepper


def arm_from_environment(session_id: int) -> Stepper | None:
    text = os.environ.get(ENV_VAR, "").strip()
    return arm(session_id, parse(text)) if text else None


def armed(session_id: int | None) -> bool:
    """Whether ``session_id`` follows a schedule (armed already, or ``PROTON_SCHEDULE`` set for it)."""
    with _lock:
        if session_id in _steppers:
            return True
    return session_id is not None and bool(os.environ.get(ENV_VAR, "").strip())


def step(session_id: int | None = 0) -> int | None:
    """``proton.step()``: the program finished a step; returns the number of the step that starts now.

    None where no session ``session_id`` is open or no schedule applies (nothing to do then)."""
    if session_id is None:
        return None
    identity.process_group()  # seen while alive: the last file, written after the program destroys it, names it
    session = MANAGER.sessions.get(session_id)
    if session is None or session.closed:
        with _lock:
            _steppers.pop(session_id, None)
        return None
    with _lock:
        stepper = _steppers.get(session_id)
    if stepper is None:
        text = os.environ.get(ENV_VAR, "").strip()
        if not text:
            return None
        stepper = Stepper(session_id, parse(text))
        with _lock:
            _steppers[session_id] = stepper
        if stepper.schedule.window(0) is None:  # step 0 ran before the schedule was known: not a recorded step
            phase = MANAGER.advance_phase(session_id)
            MANAGER.clear_phase(session_id, phase - 1)
    return stepper.advance()
