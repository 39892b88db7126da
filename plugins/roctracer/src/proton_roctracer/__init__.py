"""Proton's roctracer backend for AMD GPUs (not implemented yet)."""

__version__ = "0.1.0"
