"""Profile data: the aggregated call tree and the optional event trace."""

from .profile import Profile
from .trace import Trace
from .tree import Tree

__all__ = ["Profile", "Trace", "Tree"]
