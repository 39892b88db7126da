"""Moved to :mod:`proton_core.model.tree`; this name stays for imports written before the move."""

from ..model.tree import Node, Tree, merge_metrics

__all__ = ["Node", "Tree", "merge_metrics"]
