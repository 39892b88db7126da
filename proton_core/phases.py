"""A session's data split into phases, so long runs can write and free what is finished.

Phase 0 starts with the session; ``advance`` closes the current phase and
opens the next.  Kernels are filed under the phase that was current when they
were *launched* (the manager's epochs carry the phase), so a phase can still
receive records after it was closed, until the backend delivers everything
launched before the close: the next flush that starts after the close.  From
then on the phase is *complete*: safe to read, write and clear.
"""

from __future__ import annotations

from typing import Callable

from .model import Profile
from .errors import ProtonError


class Phases:
    def __init__(self, new_profile: Callable[[], Profile]) -> None:
        self._new = new_profile
        self.current = 0
        self.profiles: dict[int, Profile] = {0: new_profile()}
        #: Phases below this number are complete.
        self.complete_below = 0
        #: Records that arrived for a phase already cleared (counted, never silently lost).
        self.late = 0
        #: Kernels recorded per phase (what ``launches=`` periodic writing counts).
        self.counts: dict[int, int] = {}

    def advance(self) -> int:
        """Close the current phase and open the next; returns the new phase's number."""
        self.current += 1
        self.profiles[self.current] = self._new()
        return self.current

    def profile_for(self, phase: int) -> Profile | None:
        return self.profiles.get(phase)

    def flushed(self, current_at_flush_start: int) -> None:
        """A flush that started while ``current_at_flush_start`` was current has delivered everything."""
        self.complete_below = max(self.complete_below, current_at_flush_start)

    def is_complete(self, phase: int) -> bool:
        return phase < self.complete_below

    def waiting(self) -> bool:
        """Whether an ended phase that is still kept is not complete yet (it may owe records)."""
        return any(self.complete_below <= p < self.current for p in self.profiles)

    def check(self, phase) -> int:
        if not isinstance(phase, int) or isinstance(phase, bool) or phase < 0 or phase > self.current:
            raise ProtonError(f"phase {phase!r} does not exist: phases run from 0 to {self.current}")
        return phase

    def clear(self, phase: int, up_to: bool = False) -> None:
        """Free a phase (or every phase up to it); the current phase is emptied, not removed."""
        for number in [p for p in self.profiles if p == phase or (up_to and p <= phase)]:
            if number == self.current:
                self.profiles[number] = self._new()
            else:
                del self.profiles[number]
            self.counts.pop(number, None)

    def complete_phases(self) -> list[int]:
        """Kept phases that are complete, oldest first (what periodic writing takes)."""
        return sorted(p for p in self.profiles if self.is_complete(p))

    def merged(self) -> Profile:
        """Every kept phase as one profile (what a plain finalize writes)."""
        numbers = sorted(self.profiles)
        merged = self.profiles[numbers[0]]
        for number in numbers[1:]:
            merged.merge(self.profiles[number])
        return merged
