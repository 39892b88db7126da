"""Where libcupti and libcuda are looked for, in the documented order.

``PROTON_CUPTI_LIB_PATH`` (a directory or a file) > the nvidia-cuda-cupti
wheels of this Python > the CUDA toolkit (CUDA_HOME, CUDA_PATH,
/usr/local/cuda) > the dynamic loader's own path.  Pure file checks, so
``available()`` stays cheap.
"""

from __future__ import annotations

import glob
import os
import site
import sys

ENV_VAR = "PROTON_CUPTI_LIB_PATH"
LOADER = "the dynamic loader path (LD_LIBRARY_PATH, ldconfig)"
_SONAMES = ("libcupti.so", "libcupti.so.13", "libcupti.so.12")


def _site_dirs() -> list[str]:
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # virtualenvs of old tools
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    seen, out = set(), []
    for d in dirs:
        if d and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _libs_in(directory: str) -> list[str]:
    """libcupti files of a directory, the unversioned name last (newest soname first)."""
    found = sorted(glob.glob(os.path.join(directory, "libcupti.so*")), reverse=True)
    return [f for f in found if os.path.isfile(f)]


def search_places() -> list[tuple[str, str]]:
    """(description, directory-or-file) in search order; nothing is opened."""
    places = []
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        places.append((f"${ENV_VAR}", env))
    for sp in _site_dirs():
        for sub in ("cuda_cupti/lib", "cu13/lib", "cu12/lib", "cuda_cupti/lib64"):
            places.append(("nvidia wheel", os.path.join(sp, "nvidia", sub)))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var, "").strip()
        if root:
            for sub in ("extras/CUPTI/lib64", "lib64", "lib"):
                places.append((f"${var}", os.path.join(root, sub)))
    for sub in ("extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        places.append(("CUDA toolkit", os.path.join("/usr/local/cuda", sub)))
    return places


def candidates() -> list[str]:
    """Files to dlopen, in order, ending with the sonames for the loader path."""
    out = []
    for label, place in search_places():
        if label == f"${ENV_VAR}" and os.path.isfile(place):
            out.append(place)
        elif os.path.isdir(place):
            out += _libs_in(place)
    out += list(_SONAMES)
    seen, unique = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            unique.append(c)
    return unique


def found_on_disk() -> str | None:
    """The first libcupti file found without asking the loader, if any."""
    for c in candidates():
        if os.sep in c:
            return c
    return None


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
