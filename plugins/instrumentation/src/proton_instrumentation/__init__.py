"""Proton's intra-kernel instrumentation backend: cycles per ``pl.scope`` of Triton/Gluon kernels."""

__version__ = "0.1.0"
