"""Where CUDA lives on this machine: toolkit roots, nvidia-* wheel directories,
the header directories and the libcupti files, each in one search order.

The build (build_backend/proton_cupti_build.py and CMakeLists.txt load this
file by path, before any build requirement exists), the runtime library
search (libsearch) and the benchmark floor's build all ask this module, so
no CUDA place is listed twice.  Standard library only, for that reason.

    python3 cuda_paths.py headers   # the header search list, ';'-joined (for CMake)
"""

from __future__ import annotations

import glob
import os
import site
import sys
import sysconfig

LIB_ENV_VAR = "PROTON_CUPTI_LIB_PATH"  # a directory or file of libcupti, searched first
HEADERS_ENV_VAR = "PROTON_CUPTI_HEADERS"  # "wheels": build against the nvidia-* wheels even with a toolkit
DEFAULT_TOOLKIT = "/usr/local/cuda"

# What the extension's build includes, and the wheels that provide it without a
# toolkit: CUDA 13's headers, of which the extension reads only what CUDA 12 and 13
# share (libcupti is dlopen'ed).
HEADERS = ("cupti.h", "cuda.h", os.path.join("crt", "host_defines.h"))
HEADER_WHEELS = ["nvidia-cuda-cupti>=13,<14", "nvidia-cuda-runtime>=13,<14", "nvidia-cuda-crt>=13,<14"]

_TOOLKIT_INCLUDE = ("include", os.path.join("extras", "CUPTI", "include"))
_TOOLKIT_LIB = ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib")
_WHEEL_INCLUDE = ("cuda_cupti", "cuda_runtime", "cuda_nvcc", "cuda_crt", "cu13", "cu12")
_WHEEL_LIB = ("cuda_cupti/lib", "cu13/lib", "cu12/lib", "cuda_cupti/lib64")


def _unique(items) -> list:
    return list(dict.fromkeys(i for i in items if i))


def toolkit_roots(environ=os.environ) -> list[tuple[str, str]]:
    """(label, root) of the CUDA toolkits, in order: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda."""
    roots = [(f"${var}", environ.get(var, "").strip()) for var in ("CUDA_HOME", "CUDA_PATH")]
    roots.append(("CUDA toolkit", DEFAULT_TOOLKIT))
    seen, out = set(), []
    for label, root in roots:
        if root and root not in seen:
            seen.add(root)
            out.append((label, root))
    return out


def site_dirs() -> list[str]:
    """This Python's package directories; sys.path too, because pip's isolated
    build environment is only there."""
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
    dirs += [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")]
    return _unique(dirs)


def wheels_forced(environ=os.environ) -> bool:
    return environ.get(HEADERS_ENV_VAR, "").strip().lower() == "wheels"


def toolkit_include_dirs(environ=os.environ) -> list[str]:
    return _unique(os.path.join(root, sub) for _, root in toolkit_roots(environ) for sub in _TOOLKIT_INCLUDE)


def wheel_include_dirs() -> list[str]:
    return _unique(os.path.join(sp, "nvidia", sub, "include") for sp in site_dirs() for sub in _WHEEL_INCLUDE)


def header_dirs(environ=os.environ) -> list[str]:
    """Include directories to search, in order: the toolkits (skipped when
    PROTON_CUPTI_HEADERS=wheels), then the nvidia-* wheels."""
    return ([] if wheels_forced(environ) else toolkit_include_dirs(environ)) + wheel_include_dirs()


def find_headers(headers=HEADERS, environ=os.environ, isfile=os.path.isfile) -> dict[str, str]:
    """{header: first directory of header_dirs holding it}; missing headers are left out."""
    found = {}
    for d in header_dirs(environ):
        for h in headers:
            if h not in found and isfile(os.path.join(d, h)):
                found[h] = d
    return found


def extra_build_requires(environ=os.environ, isfile=os.path.isfile) -> list[str]:
    """The header wheels the build needs: none when a toolkit holds every header
    (and the user did not ask for the wheels)."""
    toolkit = toolkit_include_dirs(environ)
    if wheels_forced(environ) or not all(any(isfile(os.path.join(d, h)) for d in toolkit) for h in HEADERS):
        return list(HEADER_WHEELS)
    return []


def library_places(environ=os.environ) -> list[tuple[str, str]]:
    """(label, directory-or-file) where libcupti is looked for, in order:
    $PROTON_CUPTI_LIB_PATH, the nvidia-* wheels, the toolkits.  Nothing is opened."""
    places = []
    env = environ.get(LIB_ENV_VAR, "").strip()
    if env:
        places.append((f"${LIB_ENV_VAR}", env))
    places += [("nvidia wheel", os.path.join(sp, "nvidia", sub)) for sp in site_dirs() for sub in _WHEEL_LIB]
    places += [(label, os.path.join(root, sub)) for label, root in toolkit_roots(environ) for sub in _TOOLKIT_LIB]
    return places


def libcupti_files(environ=os.environ) -> list[str]:
    """libcupti files in library_places, in order; in a directory the newest soname first."""
    out = []
    for label, place in library_places(environ):
        if label == f"${LIB_ENV_VAR}" and os.path.isfile(place):
            out.append(place)
        elif os.path.isdir(place):
            out += [f for f in sorted(glob.glob(os.path.join(place, "libcupti.so*")), reverse=True)
                    if os.path.isfile(f)]
    return _unique(out)


if __name__ == "__main__":
    if sys.argv[1:] != ["headers"]:
        sys.exit("usage: cuda_paths.py headers")
    print(";".join(header_dirs()))
