"""Proton's NVTX bridge (not implemented yet: ``hook="nvtx"`` says so)."""
