"""Registers the ``instrumentation`` backend (cycles per intra-kernel scope of Triton/Gluon kernels).

Cheap to import: Triton, libtriton and torch are loaded only when a session starts.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import importlib.util

from proton_core import hookimpl

MIN_VERSION = (3, 6)


def _version_tuple(version: str) -> tuple[int, int]:
    from .compiler_hook import _version_tuple

    return _version_tuple(version)


@functools.lru_cache(maxsize=1)
def _libtriton_reason(version: str) -> str | None:
    """Whether this libtriton has the proton passes (imported once, the answer cached)."""
    from .compiler_hook import missing_passes

    missing = missing_passes()
    if missing:
        return f"triton {version}'s libtriton lacks the proton passes ({', '.join(missing[:3])}...): upgrade Triton"
    return None


def available() -> str | None:
    """None when the backend can run here, else a one-line reason."""
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed; pip install 'triton>=3.6' (kernels annotated with triton.profiler.language)"
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    if _version_tuple(version) < MIN_VERSION:
        return f"triton {version} is too old: intra-kernel instrumentation needs Triton 3.6 or newer"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver (libcuda.so.1 not found): the instrumentation backend runs on NVIDIA GPUs only"
    return _libtriton_reason(version)


def _factory():
    from .backend import InstrumentationBackend

    return InstrumentationBackend()


@hookimpl
def proton_register_backends(register):
    register("instrumentation", _factory, priority=-10, available=available, modes=("default",),
             description="cycles per intra-kernel scope (pl.enter_scope/pl.exit_scope) of Triton and Gluon kernels, "
                         "per warp; mode='default:granularity=warp_group:buffer_type=global:buffer_size=4096'")
