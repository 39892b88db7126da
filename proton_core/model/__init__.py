"""The profile model: the types every part of Proton that holds profile data shares.

What a session records: :class:`Tree` (one node per call path, exclusive
values), :class:`Trace` (every event, ``data="trace"``) and the
:class:`Profile` holding both.  The model knows no file format and no
session: sessions fill it, sinks and :mod:`proton_core.formats` write it.
"""

from __future__ import annotations

from .profile import Profile
from .trace import Trace
from .tree import Node, Tree

__all__ = ["Node", "Profile", "Trace", "Tree"]
