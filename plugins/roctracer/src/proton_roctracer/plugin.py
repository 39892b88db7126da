"""Registers the AMD backend as ``rocprofiler`` (picked automatically on an AMD GPU with a working
rocprofiler-sdk) and ``roctracer`` (the same implementation, the name older Proton used).

Importing this module is cheap and never touches ROCm: the extension and librocprofiler-sdk are
loaded only when a session starts with this backend.
"""

from __future__ import annotations

import os

from proton_core import hookimpl

from . import libsearch

KFD = "/dev/kfd"


def amd_gpu_reason() -> str | None:
    """Why there is no AMD GPU here (no amdgpu kernel driver device), or None."""
    if not os.path.exists(KFD):
        return f"no AMD GPU ({KFD} is absent)"
    return None


def available() -> str | None:
    """None when the rocprofiler backend can run here, else a one-line reason."""
    reason = amd_gpu_reason()
    if reason:
        return reason
    try:
        from . import _rocprofiler  # noqa: F401
    except ImportError as exc:
        return f"the proton-profiler-roctracer extension is not built ({exc})"
    if libsearch.library_files():
        return None
    import ctypes

    for soname in libsearch.SONAMES:
        try:
            ctypes.CDLL(soname)
            return None
        except OSError:
            continue
    return libsearch.not_found_message()


def _factory(name):
    def factory():
        from .backend import RocprofilerBackend

        return RocprofilerBackend(name)

    return factory


DESCRIPTION = ("AMD GPUs through rocprofiler-sdk (ROCm 6.2+): kernel time and count per call path and device; "
               "roctx ranges are scopes")


@hookimpl
def proton_register_backends(register):
    register("rocprofiler", _factory("rocprofiler"), priority=90, available=available, description=DESCRIPTION)
    # Priority 0: never picked automatically (rocprofiler is), so `start()` names one backend.
    register("roctracer", _factory("roctracer"), priority=0, available=available,
             description="the rocprofiler backend under the name older Proton used")
