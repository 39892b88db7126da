"""Proton's roctracer backend for AMD GPUs (not implemented yet)."""
