"""Proton's intra-kernel instrumentation backend (not implemented yet)."""

__version__ = "0.1.0"
