"""Build and locate the bare-CUPTI floor module at run time, on the machine that measures.

Built with the plain compiler (no build system) so a broken toolchain shows one
clear error and the harness carries on without the floor.  libcupti is found the
way Proton finds it, preferring a copy the process has already loaded so the
floor never brings a second CUPTI into a process.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "floor.cpp")
MODULE = "_proton_floor"


class BuildError(RuntimeError):
    pass


def _cuda_roots() -> list[str]:
    roots = [os.environ.get(k) for k in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda"]
    return [r for r in dict.fromkeys(roots) if r and os.path.isdir(r)]


def _site_dirs() -> list[str]:
    dirs = [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")] + list(sys.path)
    return [d for d in dict.fromkeys(dirs) if d and os.path.isdir(d)]


def include_dirs() -> list[str]:
    """Directories holding cupti.h and cuda.h (toolkit first, then nvidia wheels)."""
    candidates = []
    for root in _cuda_roots():
        candidates += [os.path.join(root, "include"), os.path.join(root, "extras", "CUPTI", "include")]
    for site in _site_dirs():
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
    found: dict[str, str] = {}
    for d in candidates:
        for header in ("cupti.h", "cuda.h"):
            if header not in found and os.path.isfile(os.path.join(d, header)):
                found[header] = d
        if len(found) == 2:
            return list(dict.fromkeys(found.values()))
    missing = [h for h in ("cupti.h", "cuda.h") if h not in found]
    raise BuildError(f"no {' or '.join(missing)} found (looked in {', '.join(candidates) or 'nothing'})")


def python_include() -> str:
    for key in ("include", "platinclude"):
        d = sysconfig.get_paths().get(key)
        if d and os.path.isfile(os.path.join(d, "Python.h")):
            return d
    try:  # a distro Python whose sysconfig points elsewhere
        out = subprocess.run(["python3-config", "--includes"], capture_output=True, text=True, timeout=20).stdout
        for flag in out.split():
            if flag.startswith("-I") and os.path.isfile(os.path.join(flag[2:], "Python.h")):
                return flag[2:]
    except (OSError, subprocess.SubprocessError):
        pass
    raise BuildError("Python.h not found (install the python3-dev headers)")


def build(build_dir: str) -> str:
    """Compile the floor into ``build_dir``; return that directory (for sys.path)."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise BuildError("no C++ compiler (c++/g++) on PATH")
    os.makedirs(build_dir, exist_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(build_dir, MODULE + suffix)
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-std=c++17", f"-I{python_include()}"]
    cmd += [f"-I{d}" for d in include_dirs()]
    cmd += [SOURCE, "-o", target, "-ldl"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"compiler did not run: {exc}") from exc
    if proc.returncode != 0 or not os.path.isfile(target):
        log = (proc.stderr or proc.stdout or "").strip()
        raise BuildError(f"compile failed (rc={proc.returncode}): {' '.join(cmd)}\n{log[-4000:]}")
    return build_dir


def loaded_cupti() -> str | None:
    """A libcupti already mapped into this process (torch or JAX may bring one)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if "libcupti.so" in os.path.basename(path) and os.path.isfile(path):
                    return path
    except OSError:
        pass
    return None


def cupti_candidates() -> list[str]:
    """libcupti paths in Proton's order: env, nvidia wheels, the toolkit, the loader."""
    out = []
    env = os.environ.get("PROTON_CUPTI_LIB_PATH")
    if env:
        out += sorted(glob.glob(os.path.join(env, "libcupti.so*")), reverse=True) if os.path.isdir(env) else [env]
    for site in _site_dirs():
        out += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib", "libcupti.so*")), reverse=True)
    for root in _cuda_roots():
        for sub in ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib"):
            out += sorted(glob.glob(os.path.join(root, sub, "libcupti.so*")), reverse=True)
    return [p for p in dict.fromkeys(out) if os.path.isfile(p)]


def find_cupti() -> str:
    """The libcupti the floor should dlopen; 'libcupti.so' leaves it to the loader."""
    return loaded_cupti() or next(iter(cupti_candidates()), "libcupti.so")


if __name__ == "__main__":
    d = build(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "_build"))
    print("built into", d, "| libcupti:", find_cupti())
