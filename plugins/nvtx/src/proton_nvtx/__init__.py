"""Proton's NVTX bridge (placeholder until its issue: registers nothing yet)."""
