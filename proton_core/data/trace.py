"""Moved to :mod:`proton_core.model.trace`; this name stays for imports written before the move."""

from ..model.trace import KernelEvent, KernelSlice, ScopeEvent, Trace

__all__ = ["KernelEvent", "KernelSlice", "ScopeEvent", "Trace"]
