"""Where libcupti and libcuda are looked for, in the documented order.

``PROTON_CUPTI_LIB_PATH`` (a directory or a file) > the nvidia-cuda-cupti
wheels of this Python > the CUDA toolkit (CUDA_HOME, CUDA_PATH,
/usr/local/cuda) > the dynamic loader's own path.  The places themselves come
from cuda_paths (shared with the build); this module adds the loader's
sonames and the messages.  Pure file checks, so ``available()`` stays cheap.
"""

from __future__ import annotations

from . import cuda_paths

ENV_VAR = cuda_paths.LIB_ENV_VAR
LOADER = "the dynamic loader path (LD_LIBRARY_PATH, ldconfig)"
_SONAMES = ("libcupti.so", "libcupti.so.13", "libcupti.so.12")


def search_places() -> list[tuple[str, str]]:
    """(description, directory-or-file) in search order; nothing is opened."""
    return cuda_paths.library_places()


def candidates() -> list[str]:
    """Files to dlopen, in order, ending with the sonames for the loader path."""
    return list(dict.fromkeys(cuda_paths.libcupti_files() + list(_SONAMES)))


def found_on_disk() -> str | None:
    """The first libcupti file found without asking the loader, if any."""
    files = cuda_paths.libcupti_files()
    return files[0] if files else None


def not_found_message(errors: list[tuple[str, str]] | None = None) -> str:
    """One line naming every place tried and the variable that fixes it."""
    tried = [place for _, place in search_places()] + [LOADER]
    msg = (f"libcupti not found (tried: {', '.join(tried)}); set {ENV_VAR} to the directory or file of "
           "libcupti.so, or pip install nvidia-cuda-cupti (CUDA 13) / nvidia-cuda-cupti-cu12 (CUDA 12)")
    if errors:
        msg += "; load errors: " + "; ".join(f"{c}: {e}" for c, e in errors)
    return msg


def driver_reason() -> str | None:
    """Why the CUDA driver cannot be used here, or None."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver (libcuda.so.1 cannot be loaded)"
    return None
