"""Proton's AMD backend: kernel time per call path through rocprofiler-sdk (loaded at run time)."""

__version__ = "0.1.0"


def attach() -> None:
    """Configure Proton as a rocprofiler-sdk tool now, before the program's first GPU call.

    ``start()`` does this itself; call this right after ``import proton_core`` when a session
    starts only after the program already used the GPU (rocprofiler-sdk accepts a tool only
    before the ROCm runtime made its first queue).  Raises ProtonError with one line otherwise.
    """
    from .backend import attach_sdk

    attach_sdk()
