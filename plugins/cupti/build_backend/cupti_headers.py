"""Where the build finds cupti.h, cuda.h and crt/host_defines.h, and whether it needs wheels for them.

A CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda) comes first.  Without one,
the nvidia-cuda-cupti / -runtime / -crt wheels become build requirements, so a
plain ``pip install proton-cupti`` builds on a machine with no toolkit at all.
``PROTON_CUPTI_HEADERS=wheels`` takes the wheels even when a toolkit is there.
No third-party imports: this runs before the build requirements exist.
"""

from __future__ import annotations

import os
import site
import sys

HEADERS = ("cupti.h", "cuda.h", os.path.join("crt", "host_defines.h"))
# Headers of CUDA 13; the extension reads only what CUDA 12 and 13 share (libcupti is dlopen'ed).
HEADER_WHEELS = ["nvidia-cuda-cupti>=13,<14", "nvidia-cuda-runtime>=13,<14", "nvidia-cuda-crt>=13,<14"]
ENV_VAR = "PROTON_CUPTI_HEADERS"


def wheels_forced(environ=os.environ) -> bool:
    return environ.get(ENV_VAR, "").strip().lower() == "wheels"


def toolkit_include_dirs(environ=os.environ) -> list[str]:
    """Include directories of the CUDA toolkits that may hold the headers, in search order."""
    roots = [environ.get("CUDA_HOME", ""), environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    dirs = []
    for root in roots:
        if root:
            dirs += [os.path.join(root, "include"), os.path.join(root, "extras", "CUPTI", "include")]
    return list(dict.fromkeys(dirs))


def wheel_include_dirs() -> list[str]:
    """Include directories of the nvidia-* wheels visible to this Python.  sys.path
    too: pip's isolated build environment is on it, not among the site dirs."""
    roots = site.getsitepackages() + [site.getusersitepackages()]
    roots += [p for p in sys.path if p.endswith("-packages")]
    subs = ("cuda_cupti", "cuda_runtime", "cuda_nvcc", "cuda_crt", "cu13", "cu12")
    return list(dict.fromkeys(os.path.join(r, "nvidia", s, "include") for r in roots for s in subs))


def search_dirs(environ=os.environ) -> list[str]:
    """Where CMake looks for the headers, in order (the toolkits are skipped when wheels are forced)."""
    return ([] if wheels_forced(environ) else toolkit_include_dirs(environ)) + wheel_include_dirs()


def toolkit_has_headers(environ=os.environ, isfile=os.path.isfile) -> bool:
    """Whether every header is in some toolkit include directory."""
    dirs = toolkit_include_dirs(environ)
    return all(any(isfile(os.path.join(d, h)) for d in dirs) for h in HEADERS)


def extra_build_requires(environ=os.environ, isfile=os.path.isfile) -> list[str]:
    """The header wheels, when the toolkit cannot serve the build (or the user asked for them)."""
    if wheels_forced(environ) or not toolkit_has_headers(environ, isfile):
        return list(HEADER_WHEELS)
    return []


if __name__ == "__main__":  # CMakeLists.txt reads the search list as a CMake list
    print(";".join(search_dirs()))
