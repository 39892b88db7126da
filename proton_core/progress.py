"""One progress line on stderr for work that turns out slow (writing or reading a big profile).

    with progress("writing big.hatchet"):
        write(...)

Nothing is printed when the work ends within ``DELAY`` seconds.  Past that a
timer thread prints ``proton: writing big.hatchet ...`` without a newline,
and the end of the work completes the same line: `` 3.4 s`` (or
`` failed after 3.4 s``).  The line follows the proton logger's rules (see
:mod:`proton_core.log`): it is silent where that logger is silenced, and
where the program configured logging, the finished line is logged at INFO
instead of written.
"""

from __future__ import annotations

import logging
import threading
import time

from .log import logger, logging_configured, write_stderr

#: Seconds the work may take before the line appears.
DELAY = 2.0


class progress:
    """Context manager printing ``<prefix>: <what> ... <seconds> s`` for work slower than ``delay``."""

    def __init__(self, what: str, prefix: str = "proton", delay: float | None = None) -> None:
        self.what = what
        self.prefix = prefix
        self.delay = DELAY if delay is None else delay
        self._lock = threading.Lock()
        self._shown = False
        self._done = False
        self._timer: threading.Timer | None = None

    def __enter__(self) -> "progress":
        self._start = time.monotonic()
        if logger.isEnabledFor(logging.WARNING):
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        with self._lock:
            if self._done or logging_configured():
                return
            self._shown = write_stderr(f"{self.prefix}: {self.what} ...")

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._timer is None:
            return
        self._timer.cancel()
        elapsed = time.monotonic() - self._start
        with self._lock:
            self._done = True
            outcome = f"{elapsed:.1f} s" if exc_type is None else f"failed after {elapsed:.1f} s"
            if self._shown:
                write_stderr(f" {outcome}\n")
            elif elapsed >= self.delay and logging_configured():
                logger.info(f"{self.what}: {outcome}")
