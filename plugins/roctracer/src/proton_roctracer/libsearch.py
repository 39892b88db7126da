"""Where librocprofiler-sdk is looked for, in the documented order, and the one-line error.

``PROTON_ROCPROFILER_SDK_PATH`` (a directory or a file) > ``ROCM_PATH`` > ``/opt/rocm`` then
``/opt/rocm-<version>`` (newest first) > the ROCm Python wheels of this Python (``rocm-sdk-core``
ships only versioned names such as ``librocprofiler-sdk.so.1``) > the dynamic loader's path.
Pure file checks, so ``available()`` stays cheap.
"""

from __future__ import annotations

import glob
import os
import re
import sys

ENV_VAR = "PROTON_ROCPROFILER_SDK_PATH"
LOADER = "the dynamic loader path (LD_LIBRARY_PATH, ldconfig)"
BASENAME = "librocprofiler-sdk.so"
SONAMES = ("librocprofiler-sdk.so.1", "librocprofiler-sdk.so")
#: Packages of the ROCm Python wheels (and torch's ROCm wheels) that carry ROCm's libraries.
WHEEL_PACKAGES = ("_rocm_sdk_core", "rocm_sdk_core", "torch")
ROCTRACER = "libroctracer64.so"


def _version_key(path: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", os.path.basename(path).split(".so", 1)[1]))


def _rocm_dirs() -> list[str]:
    """/opt/rocm, then /opt/rocm-X.Y.Z newest first."""
    out = ["/opt/rocm"]
    versioned = glob.glob("/opt/rocm-*")
    versioned.sort(key=lambda p: tuple(int(n) for n in re.findall(r"\d+", os.path.basename(p))), reverse=True)
    return out + versioned


def search_places(environ=None, opt_dirs=None, site_dirs=None) -> list[tuple[str, str, bool]]:
    """(description, directory-or-file, versioned_only) in search order; nothing is opened."""
    env = os.environ if environ is None else environ
    places: list[tuple[str, str, bool]] = []
    if env.get(ENV_VAR):
        places.append((ENV_VAR, env[ENV_VAR], False))
    if env.get("ROCM_PATH"):
        for sub in ("lib", "lib64"):
            places.append(("ROCM_PATH", os.path.join(env["ROCM_PATH"], sub), False))
    for d in (_rocm_dirs() if opt_dirs is None else opt_dirs):
        places.append((d, os.path.join(d, "lib"), False))
    for site in (sys.path if site_dirs is None else site_dirs):
        if not site or not os.path.isdir(site):
            continue
        for pkg in WHEEL_PACKAGES:
            for sub in ("lib", "lib64"):
                d = os.path.join(site, pkg, sub)
                if os.path.isdir(d):
                    places.append((f"the {pkg} wheel", d, True))
    return places


def files_in(place: str, versioned_only: bool) -> list[str]:
    """librocprofiler-sdk files of a directory (or the file itself), the plain name first, then newest version."""
    if os.path.isfile(place):
        return [place]
    if not os.path.isdir(place):
        return []
    out = []
    plain = os.path.join(place, BASENAME)
    if not versioned_only and os.path.exists(plain):
        out.append(plain)
    versioned = [p for p in glob.glob(os.path.join(place, BASENAME + ".*")) if not p.endswith(".py")]
    versioned.sort(key=_version_key, reverse=True)
    return out + versioned


def library_files(**kw) -> list[str]:
    files: list[str] = []
    for _, place, versioned_only in search_places(**kw):
        files += files_in(place, versioned_only)
    return list(dict.fromkeys(files))


def candidates(**kw) -> list[str]:
    """Files to dlopen, in order, ending with the sonames for the loader path."""
    return list(dict.fromkeys(library_files(**kw) + list(SONAMES)))


def roctracer_only(**kw) -> str | None:
    """A libroctracer64 where no rocprofiler-sdk is: ROCm older than 6.2."""
    for _, place, _ in search_places(**kw):
        d = place if os.path.isdir(place) else os.path.dirname(place)
        hits = glob.glob(os.path.join(d, ROCTRACER + "*"))
        if hits:
            return sorted(hits)[0]
    return None


def not_found_message(errors: list[tuple[str, str]] | None = None, **kw) -> str:
    """One line naming every place tried and what fixes it."""
    tried = [place for _, place, _ in search_places(**kw)] + [LOADER]
    msg = (f"librocprofiler-sdk not found (tried: {', '.join(tried)}); set {ENV_VAR} to the directory or file of "
           "librocprofiler-sdk.so, or ROCM_PATH to a ROCm 6.2 or newer")
    old = roctracer_only(**kw)
    if old:
        msg += f"; only roctracer was found ({old}): that ROCm is older than 6.2, which this backend does not drive"
    if errors:
        msg += "; load errors: " + "; ".join(f"{c}: {e}" for c, e in errors)
    return msg
