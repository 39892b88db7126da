"""Proton's messages go through the ``proton`` logger, one line each.

Where the program has not configured logging (no handler on the root logger),
a message still reaches stderr as ``proton: <message>``; where it has, the
message propagates to the program's handlers instead, so it is shown once.
Silence it the usual way: ``logging.getLogger("proton").setLevel(logging.ERROR)``.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger("proton")


class _StderrUnlessConfigured(logging.Handler):
    """Writes ``proton: message`` to the current stderr while the root logger has no handler."""

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:
            return  # the program configured logging: propagation shows it there
        try:
            sys.stderr.write(f"proton: {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:  # a closed stderr must not break profiling
            self.handleError(record)


if not any(isinstance(h, _StderrUnlessConfigured) for h in logger.handlers):
    logger.addHandler(_StderrUnlessConfigured())


def warn(message: str) -> None:
    """One warning line (no newline inside)."""
    logger.warning(" ".join(message.split("\n")))


def info(message: str) -> None:
    logger.info(message)
