"""Recording windows: what ``start``, ``stop`` and ``status`` do to this process's sessions.

Each window is a phase of its own (:mod:`proton_core.phases`).  Going idle (at :func:`idle` and at ``stop``)
deactivates a session and ends its phase, so the phase that opens then stays empty until the next
``start`` activates it; ``stop`` ends the window's phase, flushes the backend (every kernel launched in
the window is delivered) and writes the complete phases as parts, ``<name>.part_<N>.<ext>``
(:func:`proton_core.output.write_parts`, as periodic writing does), then frees them.  A part that cannot
be written stays in memory and is written at the next ``stop`` or with the session at exit: never lost.
Everything runs under the manager's lock, so a command never meets a half-done periodic write or finalize.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from ..errors import ProtonError
from ..manager import MANAGER
from ..output import write_parts
from ..plugins import get_plugins

#: How many window files ``status`` names before it only counts them.
SHOWN_PATHS = 4


@dataclass
class Record:
    """One session's windows as this module sees them."""

    fresh_phase: int  # the phase opened when the session last went idle: nothing was recorded in it
    since: float | None = None  # wall-clock time the open window started; None while idle
    parts_before: int = 0  # len(session.parts) when the open window started
    windows: int = 0  # windows closed
    paths: list[str] = field(default_factory=list)  # the files closed windows were written to


class Windows:
    """The windows of every session of this process (one instance per process: :data:`WINDOWS`)."""

    def __init__(self) -> None:
        self.records: dict[int, Record] = {}
        self.run = ""  # the run id ``status`` reports (set by the server)
        self._lock = threading.Lock()  # commands one at a time, also when two listeners ever ran

    # ------------------------------------------------------------- helpers ----
    def _open_sessions(self):
        return [s for s in MANAGER.sessions.values() if not s.closed]

    def _go_idle(self, session) -> int:
        """Deactivate ``session`` and end its phase; returns the phase that opens (empty, idle)."""
        MANAGER.set_active(session.id, False)
        return MANAGER.advance_phase(session.id)

    def _record(self, session) -> Record:
        record = self.records.get(session.id)
        if record is None:  # a session opened after serve(): it joins, as it stands
            record = self.records[session.id] = Record(fresh_phase=-1)
            if session.active:
                record.since, record.parts_before = time.time(), len(session.parts)
        return record

    # ------------------------------------------------------------ commands ----
    def idle(self) -> list[int]:
        """Leave every open session idle, recording nothing until ``start`` (what serve() does first)."""
        with self._lock, MANAGER.lock:
            sessions = self._open_sessions()
            for session in sessions:
                self.records[session.id] = Record(fresh_phase=self._go_idle(session))
            return [s.id for s in sessions]

    def start(self) -> str:
        with self._lock, MANAGER.lock:
            sessions = self._open_sessions()
            if not sessions:
                raise ProtonError(no_session())
            said = []
            for session in sessions:
                record = self._record(session)
                if session.active:
                    said.append(f"session {session.id} {session.name!r} was already recording")
                    continue
                if session.phases.current != record.fresh_phase:
                    MANAGER.advance_phase(session.id)  # whatever was recorded since it went idle keeps its phase
                record.since, record.parts_before = time.time(), len(session.parts)
                MANAGER.set_active(session.id, True)
                said.append(f"session {session.id} {session.name!r} recording window {record.windows + 1} "
                            f"(phase {session.phases.current})")
            return "; ".join(said)

    def stop(self) -> str:
        with self._lock, MANAGER.lock:
            sessions = self._open_sessions()
            if not sessions:
                raise ProtonError(no_session())
            said = []
            for session in sessions:
                record = self._record(session)
                if not session.active:
                    said.append(f"session {session.id} {session.name!r} was already idle")
                    continue
                said.append(self._close_window(session, record))
            return "; ".join(said)

    def _close_window(self, session, record: Record) -> str:
        """End the open window of ``session``, write it as part files, say in a clause what became of it."""
        window = record.windows + 1
        phase = session.phases.current
        record.fresh_phase = self._go_idle(session)
        record.since = None
        record.windows = window
        MANAGER.flush(session.backend_state)  # complete: every kernel launched in the window is delivered
        session.resolve_pending()
        fmt = (session.writer.options.format if session.writer is not None else None) or session.output_format
        write_parts(session, fmt, session.name, get_plugins())
        files = [os.path.abspath(p) for p in session.parts[record.parts_before:]]
        record.paths.extend(files)
        head = f"session {session.id} {session.name!r} idle; window {window}"
        if phase in session.phases.profiles:  # kept: the write failed (said on stderr), retried later
            return (f"{head} (phase {phase}) could not be written yet: kept in memory, written at the next stop "
                    "or at exit" + (f"; also wrote {', '.join(files)}" if files else ""))
        if not files:
            return f"{head} recorded nothing: no file written"
        return f"{head} written to {', '.join(files)}"

    def status(self) -> str:
        with self._lock, MANAGER.lock:
            sessions = self._open_sessions()
            if not sessions:
                return f"idle: {no_session()}"
            said = []
            for session in sessions:
                record = self._record(session)
                if session.active:
                    since = f" since {time.strftime('%H:%M:%S', time.localtime(record.since))}" \
                        if record.since else ""
                    state = f"recording window {record.windows + 1}{since}"
                else:
                    state = "idle"
                said.append(f"{state}: session {session.id} {session.name!r}, {record.windows} "
                            f"window{'s' if record.windows != 1 else ''} written{paths_clause(record.paths)}")
            return f"{'; '.join(said)} (run {self.run}, pid {os.getpid()})"


def paths_clause(paths: list[str]) -> str:
    """`: a, b` naming the files, the first and last few of many."""
    if not paths:
        return ""
    if len(paths) <= SHOWN_PATHS:
        return ": " + ", ".join(paths)
    return f": {paths[0]}, ... {', '.join(paths[-(SHOWN_PATHS - 1):])} ({len(paths)} files)"


def no_session() -> str:
    return f"no open session in pid {os.getpid()} (finalized, or never started): nothing to record"


WINDOWS = Windows()
