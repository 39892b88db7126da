"""Proton's NVTX bridge: NVTX ranges become scopes, from Python and from native code, with any backend."""

__version__ = "0.1.0"
