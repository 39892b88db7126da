"""``mode="periodic_flushing"``: a long run writes each complete phase to its own file and frees it.

Options follow upstream's mode string, ``periodic_flushing:key=value:...``:

* ``interval=<seconds>``: start a new phase this often;
* ``launches=<n>``: start a new phase once ``n`` kernels were launched in the
  current one: counted at each launch where the backend records launches in
  Python (:class:`LaunchCounter`), so a burst ends its phase at the launch that
  crosses ``n``; for a backend that records natively (cupti), at each poll;
* ``format=<sink>``: what the parts are written as (default: the session's);
* ``poll=<seconds>``: how often the writer thread flushes (default 1).

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

import itertools
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


#: The method through which a backend records each launched kernel, where it is written in Python
#: (the synthetic backend's): called once per kernel with the launch's epoch first.  A native backend
#: (cupti) records in C, where no Python counter can run; its phases end at the poll.
RECORDER = "_record"


class LaunchCounter:
    """Ends the session's phase at the launch that crosses ``launches``, on the launching thread.

    Wraps the backend instance's per-kernel recorder (:data:`RECORDER`): each kernel recorded under
    an epoch this session listens to takes a number from an ``itertools.count`` (atomic under the
    GIL, so launching threads never share a number), and the one that reaches a multiple of
    ``launches`` ends the phase right after it was recorded, outside the backend's lock.  The kernels
    before it carry the old phase's epoch and those after it the new one, so each phase holds exactly
    ``launches`` kernels however fast they come.
    """

    def __init__(self, manager, session, launches: int) -> None:
        self.manager, self.session, self.launches = manager, session, launches
        self._numbers = itertools.count(1)
        self._epoch, self._mine = None, False  # the last epoch seen and whether the session listens to it
        self._backend = None

    def attach(self, backend) -> bool:
        """Count ``backend``'s launches from now on; False where it records natively (nothing to wrap)."""
        recorder = getattr(backend, RECORDER, None)
        if recorder is None or not callable(recorder):
            return False
        chain = _CHAINS.get(id(backend))
        if chain is None:
            chain = _CHAINS[id(backend)] = _Chain(backend, recorder)
        chain.counters.append(self)
        self._backend = backend
        return True

    def detach(self) -> None:
        backend, self._backend = self._backend, None
        chain = _CHAINS.get(id(backend)) if backend is not None else None
        if chain is not None and self in chain.counters:
            chain.counters.remove(self)
            if not chain.counters:
                chain.unwrap()
                del _CHAINS[id(backend)]

    def listens(self, epoch) -> bool:
        if epoch != self._epoch:
            routes = self.session.backend_state.epochs.get(epoch, ())
            self._mine = any(s is self.session for s, _ in routes)
            self._epoch = epoch
        return self._mine

    def recorded(self, epoch) -> None:
        """One kernel was recorded under ``epoch`` (its lock released): end the phase at the Nth."""
        if self.session.closed or not self.listens(epoch) or next(self._numbers) % self.launches:
            return
        try:
            self.manager.advance_phase(self.session.id)
        except ProtonError:  # finalized (or forgotten in a forked child) meanwhile: nothing to end
            return
        self.session.writer.phase_started = time.monotonic()


class _Chain:
    """One wrapper per backend instance, calling every session's counter (sessions may share a backend)."""

    def __init__(self, backend, recorder) -> None:
        self.backend, self.counters = backend, []
        self.had_own = RECORDER in getattr(backend, "__dict__", {})
        self.original = recorder
        chain = self

        def record(epoch, *args, **kwargs):
            result = recorder(epoch, *args, **kwargs)
            for counter in tuple(chain.counters):
                counter.recorded(epoch)
            return result

        setattr(backend, RECORDER, record)

    def unwrap(self) -> None:
        if self.had_own:
            setattr(self.backend, RECORDER, self.original)
        else:
            delattr(self.backend, RECORDER)


_CHAINS: dict[int, _Chain] = {}


class Writer:
    """The thread that advances phases by interval or launch count and writes complete ones."""

    def __init__(self, manager, session, options: Options) -> None:
        self.manager, self.session, self.options = manager, session, options
        self.phase_started = time.monotonic()
        self.backlog = Backlog()
        self.counter = None  # LaunchCounter where launches= is set and the backend records in Python
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"proton-periodic-{session.id}", daemon=True)

    def start(self) -> None:
        if self.options.launches is not None:
            counter = LaunchCounter(self.manager, self.session, self.options.launches)
            if counter.attach(self.session.backend_state.backend):
                self.counter = counter
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (finalize writes what is left); safe from the writer thread itself."""
        self._stop.set()
        if self.counter is not None:
            self.counter.detach()
            self.counter = None
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def due(self, recorded: int) -> bool:
        """Whether the current phase should end now."""
        options = self.options
        if options.interval is not None and time.monotonic() - self.phase_started >= options.interval:
            return True
        # With a LaunchCounter the phase already ended at its launch; the poll only counts for the rest.
        return options.launches is not None and self.counter is None and recorded >= options.launches

    def _run(self) -> None:
        while not self._stop.wait(self.options.poll):
            if self.session.closed:  # closed without finalize (reset): nothing more to write
                if self.counter is not None:
                    self.counter.detach()
                return
            try:
                self.manager.periodic_tick(self.session)
            except Exception as exc:  # never kill the program from a background thread: say it once and stop
                from . import log

                log.warn(f"periodic writing of session {self.session.id} stopped: {exc}")
                return
