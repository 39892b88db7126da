"""The profile model: the types every part of Proton that holds profile data shares.

What a session records: :class:`Tree` (one node per call path, exclusive
values), :class:`Trace` (every event, ``data="trace"``) and the
:class:`Profile` holding both; sessions fill it, sinks write it.  What a file
holds, as read: :class:`ReadProfile` of :class:`ReadNode` (one node per node of
the file, :func:`proton_core.formats.hatchet.read`) and, column-wise for files of
millions of nodes, :class:`Table` (the viewer's).  The model knows no file format
and no session: :mod:`proton_core.formats` converts, sessions and readers use it.
"""

from __future__ import annotations

from .profile import Profile
from .read import ReadNode, ReadProfile
from .table import Table
from .trace import Trace
from .tree import Node, Tree

__all__ = ["Node", "Profile", "ReadNode", "ReadProfile", "Table", "Trace", "Tree"]
