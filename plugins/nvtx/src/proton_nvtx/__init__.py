"""Proton's NVTX bridge (not implemented yet: ``hook="nvtx"`` says so)."""

__version__ = "0.1.0"
