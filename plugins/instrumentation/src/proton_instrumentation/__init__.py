"""Proton's intra-kernel instrumentation backend (not implemented yet)."""
