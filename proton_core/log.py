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


def logging_configured() -> bool:
    """Whether the program set up logging (a handler on the root logger): then messages go there."""
    return bool(logging.getLogger().handlers)


def write_stderr(text: str) -> bool:
    """Write to the current stderr; False where it is closed or broken (that must not break profiling)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:
        return False
    return True


class _StderrUnlessConfigured(logging.Handler):
    """Writes ``proton: message`` to the current stderr while the root logger has no handler."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging_configured():  # else propagation shows it in the program's handlers
            write_stderr(f"proton: {record.getMessage()}\n")


if not any(isinstance(h, _StderrUnlessConfigured) for h in logger.handlers):
    logger.addHandler(_StderrUnlessConfigured())


def warn(message: str) -> None:
    """One warning line (no newline inside)."""
    logger.warning(" ".join(message.split("\n")))


def info(message: str) -> None:
    logger.info(message)
