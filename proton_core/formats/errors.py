"""The error of a file that cannot be read as a profile: its own module, so every format can raise it."""

from __future__ import annotations

from ..errors import ProtonError


class HatchetError(ProtonError):
    """A file that cannot be read as a hatchet profile; the message is one line naming it."""
