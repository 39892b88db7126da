"""The profile model: the types every part of Proton that holds profile data shares.

What a session records: :class:`Tree` (one node per call path, exclusive
values), :class:`Trace` (every event, ``data="trace"``) and the
:class:`Profile` holding both; sessions fill it, sinks write it.  What a file
holds, as read: :mod:`proton_core.model.read` (``ReadProfile`` of ``ReadNode``,
one node per node of the file) and, column-wise for files of millions of nodes,
:mod:`proton_core.model.table` (``Table``, the viewer's); those two load with their
readers, not with ``import proton_core``.  The model knows no file format and no
session: :mod:`proton_core.formats` converts, sessions and readers use it.
"""

from __future__ import annotations

from .profile import Profile
from .trace import Trace
from .tree import Node, Tree

__all__ = ["Node", "Profile", "Trace", "Tree"]
