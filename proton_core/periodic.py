"""``mode="periodic_flushing"``: a long run writes each complete phase to its own file and frees it.

Options follow upstream's mode string, ``periodic_flushing:key=value:...``:

* ``interval=<seconds>``: start a new phase this often;
* ``launches=<n>``: start a new phase once about ``n`` kernels were recorded
  in the current one (checked at each poll);
* ``format=<sink>``: what the parts are written as (default: the session's);
* ``poll=<seconds>``: how often the writer thread flushes (default 1).

Without ``interval`` or ``launches`` phases advance only on
``proton.data.advance_phase()``.  A background thread flushes every ``poll``
seconds and writes each complete phase to ``<name>.part_<N>.<ext>``, then
frees it, so memory stays flat however long the run; ``finalize()`` writes the
phases still open the same way.  ``proton-view`` reads the parts together.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .errors import ProtonError

MODE = "periodic_flushing"


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


class Writer:
    """The thread that advances phases by interval or launch count and writes complete ones."""

    def __init__(self, manager, session, options: Options) -> None:
        self.manager, self.session, self.options = manager, session, options
        self.phase_started = time.monotonic()
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
