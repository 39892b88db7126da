"""Registers the ``cupti`` backend with Proton (entry point group ``proton``).

Importing this module is cheap and never touches CUDA: the native extension
and libcupti are loaded only when a session starts with this backend.
"""

from __future__ import annotations

from proton_core import hookimpl

from . import libsearch


def available() -> str | None:
    """None when the cupti backend can run here, else a one-line reason."""
    reason = libsearch.driver_reason()
    if reason:
        return reason
    try:
        from . import _cupti  # noqa: F401
    except ImportError as exc:
        return f"the proton-profiler-cupti extension is not built ({exc})"
    if libsearch.found_on_disk() is None:
        import ctypes

        for soname in ("libcupti.so", "libcupti.so.13", "libcupti.so.12"):
            try:
                ctypes.CDLL(soname)
                return None
            except OSError:
                continue
        return libsearch.not_found_message()
    return None


def _factory():
    from .backend import CuptiBackend

    return CuptiBackend()


@hookimpl
def proton_register_backends(register):
    register("cupti", _factory, priority=100, available=available, modes=("pcsampling",),
             description="NVIDIA GPUs through CUPTI: kernel time and count per call path; mode='pcsampling' adds "
                         "instruction samples with stall reasons per source line")


@hookimpl
def proton_follow_environment(options, setenv):
    from . import injected

    for name, value in injected.environment(options).items():
        setenv(name, value)


@hookimpl
def proton_session_started(session):
    if getattr(session, "backend", None) == "cupti":
        from . import injected

        injected.say_if_foreign_injection()
