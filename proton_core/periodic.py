"""``mode="periodic_flushing"``: a long run writes each complete phase to its own file and frees it.

Options follow upstream's mode string, ``periodic_flushing:key=value:...``:

* ``interval=<seconds>``: start a new phase this often;
* ``launches=<n>``: start a new phase every ``n`` launches: the backend moves on by itself where
  it can count launches (:mod:`proton_core.epoch_switching`), else at the poll after ``n`` kernels
  were recorded in the current phase;
* ``format=<sink>``: what the parts are written as (default: the session's);
* ``poll=<seconds>``: how often the writer thread flushes (default 1): an ``interval=`` phase ends
  within one poll of its time.

Without ``interval`` or ``launches`` phases advance only on
``proton.data.advance_phase()``.  A background thread flushes every ``poll``
seconds and writes each complete phase to ``<name>.part_<N>.<ext>``, then
frees it, so memory stays flat however long the run; ``finalize()`` writes the
phases still open the same way.  ``proton-view`` reads the parts together.

A part that cannot be written (a full disk) is kept with the phases after it,
retried at each poll and written in order once there is room (:class:`Backlog`);
at most :data:`MAX_KEPT_PARTS` wait, older ones beyond that are dropped and
counted in the next written part's root (``dropped parts``).  At exit a part
that still cannot be written goes to the temporary directory.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass

from . import log
from .errors import ProtonError

MODE = "periodic_flushing"

#: Complete parts kept in memory while they cannot be written; older ones beyond this are dropped.
MAX_KEPT_PARTS = 16
#: The root metric of a written part that counts parts dropped before it (their data is lost).
DROPPED_PARTS_KEY = "dropped parts"


@dataclass(frozen=True)
class Options:
    interval: float | None = None
    launches: int | None = None
    format: str | None = None
    poll: float = 1.0


def split_mode(mode):
    """(the backend's mode, periodic Options or None) for a ``start(mode=...)`` string."""
    if not isinstance(mode, str) or mode.split(":", 1)[0].strip() != MODE:
        return mode, None
    values = {}
    for item in mode.split(":")[1:]:
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in ("interval", "launches", "format", "poll") or not value:
            raise ProtonError(f"mode {mode!r}: {item!r} is not an option of {MODE}; "
                              "use interval=<seconds>, launches=<n>, format=<sink> or poll=<seconds>")
        values[key] = value
    try:
        options = Options(
            interval=float(values["interval"]) if "interval" in values else None,
            launches=int(values["launches"]) if "launches" in values else None,
            format=values.get("format"),
            poll=float(values.get("poll", 1.0)),
        )
    except ValueError as exc:
        raise ProtonError(f"mode {mode!r}: {exc}") from None
    if options.poll <= 0 or (options.interval is not None and options.interval <= 0) or \
            (options.launches is not None and options.launches <= 0):
        raise ProtonError(f"mode {mode!r}: interval, launches and poll must be positive")
    return None, options


def part_name(name: str, phase: int) -> str:
    """``<name>.part_<N>`` (the sink adds its extension)."""
    return f"{name}.part_{phase}"


class Backlog:
    """Parts that could not be written yet: which phase waits, how many were dropped, what was said.

    The kept parts are the session's complete phases not yet freed (the writer stops at the first
    failure so parts stay in order); this object only remembers the failure and counts drops.
    """

    def __init__(self) -> None:
        self.failing: int | None = None  # the phase whose write failed last, None while writes succeed
        self.retries = 0
        self.dropped = 0  # parts dropped since the last written part (goes into its root)
        self.dropped_total = 0
        self.fallback_token: str | None = None

    def stamp(self, profile) -> None:
        """Put the dropped parts not yet reported into ``profile``'s root (idempotent across retries)."""
        if self.dropped:
            profile.tree.root.metrics[DROPPED_PARTS_KEY] = self.dropped

    def failed(self, session, number: int, path_name: str, exc) -> None:
        """A write of phase ``number`` failed: say it once, then drop the oldest parts beyond the cap."""
        if self.failing is None:
            log.warn(f"cannot write part {path_name} of session {session.id} ({reason(exc)}); keeping it and "
                     f"later parts (up to {MAX_KEPT_PARTS}) in memory and retrying at each poll")
        else:
            self.retries += 1
        self.failing = number
        phases = session.phases
        kept = phases.complete_phases()
        over = kept[:max(0, len(kept) - MAX_KEPT_PARTS)]
        for old in over:
            phases.clear(old)
        if over:
            if not self.dropped_total:
                log.warn(f"session {session.id}: more than {MAX_KEPT_PARTS} parts wait for disk space; dropping "
                         f"the oldest (counted as '{DROPPED_PARTS_KEY}' in the root of the next part written)")
            self.dropped += len(over)
            self.dropped_total += len(over)

    def written(self, session, number: int, path: str) -> None:
        self.dropped = 0
        if self.failing is not None and number >= self.failing:
            log.warn(f"session {session.id}: there is room again; wrote the kept part {path} "
                     f"(after {self.retries} retries) and go on")
            self.failing, self.retries = None, 0

    def fallback_name(self, name: str, number: int) -> str:
        """Where a part goes at exit when its own directory cannot take it: the temporary directory,
        one unique stem per session so its parts stay together."""
        if self.fallback_token is None:
            self.fallback_token = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
        stem = os.path.basename(name) or "proton"
        return os.path.join(tempfile.gettempdir(), f"{stem}.{self.fallback_token}.part_{number}")


def reason(exc) -> str:
    """An OSError's or ProtonError's one-line reason."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


class Writer:
    """The thread that advances phases by interval or launch count and writes complete ones."""

    def __init__(self, manager, session, options: Options) -> None:
        self.manager, self.session, self.options = manager, session, options
        self.phase_started = time.monotonic()
        self.backlog = Backlog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"proton-periodic-{session.id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (finalize writes what is left); safe from the writer thread itself."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def due(self, recorded: int) -> bool:
        """Whether the current phase should end now."""
        options = self.options
        if options.interval is not None and time.monotonic() - self.phase_started >= options.interval:
            return True
        return options.launches is not None and recorded >= options.launches

    def _run(self) -> None:
        while not self._stop.wait(self.options.poll):
            try:
                self.manager.periodic_tick(self.session)
            except Exception as exc:  # never kill the program from a background thread: say it once and stop
                from . import log

                log.warn(f"periodic writing of session {self.session.id} stopped: {exc}")
                return
