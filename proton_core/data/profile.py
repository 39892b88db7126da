"""Moved to :mod:`proton_core.model.profile`; this name stays for imports written before the move."""

from ..model.profile import Profile

__all__ = ["Profile"]
